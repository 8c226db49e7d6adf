"""``python -m spark_job [NAME ...] [options]``: the detector job, the same as ``python -m detectors run``."""

import sys

from common.cli_errors import USAGE, run_command
from detectors import registry
from detectors.__main__ import main

if __name__ == "__main__":
    sys.exit(run_command(lambda: main(["run", *sys.argv[1:]]), "python -m spark_job",
                         expected=(registry.UnknownDetectorError,), expected_exit_code=USAGE))
