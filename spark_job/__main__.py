"""``python -m spark_job [NAME ...] [options]``: the detector job, the same as ``python -m detectors run``."""

import sys

from detectors.__main__ import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
