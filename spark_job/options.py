"""How the detector job runs: its options, shared by the command line, the demo, the benchmark and tests.

No PySpark import here, so ``python -m detectors run --help`` answers without starting anything.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from common.cli_errors import non_negative_float, positive_int

DLQ_QUERY = "dlq"
SINKS = ("exactly-once", "spark-kafka")


@dataclass
class RunOptions:
    sink: str = "exactly-once"                  # or "spark-kafka": Spark's built-in, at-least-once sink
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = 200_000
    trigger_seconds: float = 0.0                # 0: start the next micro-batch as soon as one ends
    checkpoint_root: str | Path | None = None     # a local folder or a URI; None: the settings'
    shared: bool = False                        # all detectors in one query (one read of the topic)
    with_dlq: bool = True                       # run the dead-letter branch
    fail_on_data_loss: bool = True
    extra_source_options: dict[str, str] = field(default_factory=dict)



def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's options on a command line (``python -m detectors run`` and ``python -m spark_job``)."""
    parser.add_argument("--sink", choices=SINKS, default="exactly-once",
                        help="exactly-once (Kafka transactions, default) or spark-kafka (Spark's at-least-once sink)")
    parser.add_argument("--shared", action="store_true", help="all detectors in one query (one read of the topic)")
    parser.add_argument("--no-dlq", action="store_true", help="do not run the dead-letter branch")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest | latest | JSON offsets")
    parser.add_argument("--max-offsets-per-trigger", type=positive_int, default=200_000,
                        help="records per micro-batch at most (default 200000)")
    parser.add_argument("--trigger-seconds", type=non_negative_float, default=0.0,
                        help="start a micro-batch every N seconds (default 0: as soon as one ends)")
    parser.add_argument("--checkpoint-root", default=None, help="a local folder or a URI (hdfs://, s3a://)")
    parser.add_argument("--duration", type=non_negative_float, default=0.0,
                        help="stop after this many seconds (0: run until Ctrl-C)")


def from_arguments(args: argparse.Namespace) -> RunOptions:
    return RunOptions(sink=args.sink, starting_offsets=args.starting_offsets,
                      max_offsets_per_trigger=args.max_offsets_per_trigger, trigger_seconds=args.trigger_seconds,
                      checkpoint_root=args.checkpoint_root, shared=args.shared, with_dlq=not args.no_dlq)
