"""A detector job in its own process, for crash tests: ``python -m tests.integration.crash_driver NAME SINK``.

Settings (topics, checkpoint root) come from the environment like any service of the project.
Runs until killed.
"""

import logging
import sys

from common.settings import get_settings
from common.spark import get_spark
from spark_job.queries import RunOptions, start_detectors
from tests.detectors_for_tests import BIG_AMOUNT


def main(name: str, sink: str, max_offsets: int) -> None:
    logging.basicConfig(level=logging.WARNING)
    settings = get_settings()
    if name == BIG_AMOUNT.name:
        detector = BIG_AMOUNT
    else:
        from detectors import registry
        detector = registry.get(name)
    spark = get_spark(f"crash-{name}", settings)
    options = RunOptions(sink=sink, max_offsets_per_trigger=max_offsets, with_dlq=False)
    (query,) = start_detectors(spark, [detector], settings, options)
    query.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
