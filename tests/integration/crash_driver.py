"""A detector job in its own process, for crash tests:
``python -m tests.integration.crash_driver NAME SINK MAX_OFFSETS [--crash-after-commit BATCH]
[--starting-offsets OFFSETS]``.

NAME is a detector, or ``dlq`` for the dead-letter query alone. Settings (topics, checkpoint root, the
driver's heap) come from the environment like any service of the project. Runs until killed, or until a
query fails (then it exits non-zero with the error). ``--crash-after-commit BATCH`` kills the whole job
(its process group: the JVM too) right after the exactly-once writer committed batch BATCH to Kafka and
before Spark recorded it in its commit log: the restarted job must skip the replayed batch.
"""

import argparse
import logging
import os
import signal

from common.settings import get_settings
from common.spark import get_spark
from spark_job.alert_writer import ExactlyOnceWriter
from spark_job.queries import RunOptions, start_detectors
from tests.detectors_for_tests import BIG_AMOUNT

DLQ_ONLY = "dlq"


def crash_after_commit(batch: int):
    def hook(writer: ExactlyOnceWriter, batch_id: int) -> None:
        if batch_id == batch:
            os.killpg(os.getpgrp(), signal.SIGKILL)
    return hook


def main(name: str, sink: str, max_offsets: int, crash_batch: int | None = None,
         starting_offsets: str = "earliest") -> None:
    logging.basicConfig(level=logging.WARNING)
    settings = get_settings()
    if crash_batch is not None:
        ExactlyOnceWriter.after_commit = crash_after_commit(crash_batch)
    if name == DLQ_ONLY:
        detectors = []
    elif name == BIG_AMOUNT.name:
        detectors = [BIG_AMOUNT]
    else:
        from detectors import registry
        detectors = [registry.get(name)]
    spark = get_spark(f"crash-{name}", settings)
    options = RunOptions(sink=sink, max_offsets_per_trigger=max_offsets, with_dlq=name == DLQ_ONLY,
                         starting_offsets=starting_offsets)
    (query,) = start_detectors(spark, detectors, settings, options)
    query.awaitTermination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("sink")
    parser.add_argument("max_offsets", type=int)
    parser.add_argument("--crash-after-commit", type=int, default=None, metavar="BATCH")
    parser.add_argument("--starting-offsets", default="earliest")
    args = parser.parse_args()
    main(args.name, args.sink, args.max_offsets, args.crash_after_commit, args.starting_offsets)
