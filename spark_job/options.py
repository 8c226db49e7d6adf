"""How the detector job runs: its options, shared by the command line, the demo, the benchmark and tests.

No PySpark import here, so ``python -m detectors run --help`` answers without starting anything.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from common.cli_errors import UserError, non_negative_float, positive_int
from spark_job import query_names

SINKS = ("exactly-once", "spark-kafka")
Groups = tuple[tuple[str, tuple[str, ...]], ...]     # ((group name, (detector, ...)), ...)


@dataclass
class RunOptions:
    sink: str = "exactly-once"                  # or "spark-kafka": Spark's built-in, at-least-once sink
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = 200_000
    trigger_seconds: float = 0.0                # 0: start the next micro-batch as soon as one ends
    checkpoint_root: str | Path | None = None     # a local folder or a URI; None: the settings'
    shared: bool = False                        # all detectors in one query (one read of the topic)
    groups: Groups | None = None                # detectors that share a query; None: one query each
    group_triggers: tuple[tuple[str, float], ...] = ()   # (group, seconds): that group's query starts a
                                                # micro-batch every so many seconds (trigger_seconds: the rest)
    with_dlq: bool = True                       # run the dead-letter branch
    fail_on_data_loss: bool = True
    extra_source_options: dict[str, str] = field(default_factory=dict)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The job's options on a command line (``python -m detectors run`` and ``python -m spark_job``)."""
    parser.add_argument("--sink", choices=SINKS, default="exactly-once",
                        help="exactly-once (Kafka transactions, default) or spark-kafka (Spark's at-least-once sink)")
    layout = parser.add_mutually_exclusive_group()
    layout.add_argument("--groups", metavar="SPEC", default=None,
                        help="detectors that share a query, e.g. 'rules=double_swipe,velocity;ml=ml_score' "
                             "(default: the setting FRAUD_DETECTOR_GROUPS); a detector in no group runs alone")
    layout.add_argument("--shared", action="store_true", help="all detectors in one query (one read of the topic)")
    layout.add_argument("--query-per-detector", action="store_true",
                        help="every detector in a query of its own, the dead letters in another")
    parser.add_argument("--no-dlq", action="store_true", help="do not run the dead-letter branch")
    parser.add_argument("--starting-offsets", default="earliest", help="earliest | latest | JSON offsets")
    parser.add_argument("--max-offsets-per-trigger", type=positive_int, default=None,
                        help="records per micro-batch at most (default: the setting "
                             "FRAUD_DETECTOR_MAX_OFFSETS_PER_TRIGGER)")
    parser.add_argument("--trigger-seconds", type=non_negative_float, default=0.0,
                        help="start a micro-batch every N seconds (default 0: as soon as one ends)")
    parser.add_argument("--group-triggers", metavar="SPEC", default=None,
                        help="a group's query starts a micro-batch every N seconds, e.g. 'ml=3' (default: the "
                             "setting FRAUD_DETECTOR_GROUP_TRIGGERS; '' for none); other queries: --trigger-seconds")
    parser.add_argument("--checkpoint-root", default=None, help="a local folder or a URI (hdfs://, s3a://)")
    parser.add_argument("--duration", type=non_negative_float, default=0.0,
                        help="stop after this many seconds (0: run until Ctrl-C)")


def from_arguments(args: argparse.Namespace, default_groups: str, default_max_offsets: int,
                   default_group_triggers: str = "") -> RunOptions:
    groups = None if args.shared or args.query_per_detector else parse_groups(args.groups or default_groups)
    triggers = default_group_triggers if args.group_triggers is None else args.group_triggers
    return RunOptions(sink=args.sink, starting_offsets=args.starting_offsets,
                      max_offsets_per_trigger=args.max_offsets_per_trigger or default_max_offsets,
                      trigger_seconds=args.trigger_seconds, group_triggers=parse_group_triggers(triggers),
                      checkpoint_root=args.checkpoint_root, shared=args.shared, groups=groups,
                      with_dlq=not args.no_dlq)


def _named_parts(spec: str, error: str) -> list[tuple[str, str]]:
    """``'a=x; b=y'`` -> ``[('a', 'x'), ('b', 'y')]``; ``UserError(error)`` for a part without a name."""
    parts = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, sep, value = part.partition("=")
        if not sep or not name.strip().isidentifier():
            raise UserError(error)
        parts.append((name.strip(), value.strip()))
    return parts


def parse_groups(spec: str) -> Groups:
    """``'rules=a,b;ml=c'`` -> ``(('rules', ('a', 'b')), ('ml', ('c',)))``; a one-line error otherwise."""
    expected = f"detector groups {spec!r}: expected NAME=DETECTOR,DETECTOR;NAME=... "
    groups, seen = [], set()
    for name, members in _named_parts(spec, expected):
        detectors = tuple(filter(None, (m.strip() for m in members.split(","))))
        if not detectors:
            raise UserError(expected)
        if seen & set(detectors):
            raise UserError(f"detector groups {spec!r}: {', '.join(sorted(seen & set(detectors)))} in two groups")
        seen |= set(detectors)
        groups.append((name, detectors))
    return tuple(groups)


def parse_group_triggers(spec: str) -> tuple[tuple[str, float], ...]:
    """``'ml=3'`` -> ``(('ml', 3.0),)``; a one-line error otherwise."""
    expected = f"group triggers {spec!r}: expected GROUP=SECONDS;GROUP=SECONDS"
    triggers = []
    for name, seconds in _named_parts(spec, expected):
        try:
            value = float(seconds)
        except ValueError:
            raise UserError(expected) from None
        if value < 0:
            raise UserError(expected)
        triggers.append((name, value))
    return tuple(triggers)


@dataclass(frozen=True)
class QueryPlan:
    """One streaming query of the job: its name (= checkpoint folder and exactly-once writer id), the
    detectors whose branches it runs, and whether it also writes the dead letters."""

    name: str
    detectors: tuple[str, ...]
    with_dlq: bool = False
    muted: tuple[str, ...] = ()       # detectors whose branch reads no rows (spark_job.quarantine)
    trigger_seconds: float = 0.0      # 0: the next micro-batch as soon as one ends


def plan_queries(names: Sequence[str], options: RunOptions) -> list[QueryPlan]:
    """The queries that run ``names``: one shared query, the groups' queries (the dead letters in the
    first, which validates every record anyway) and one query per detector in no group, or one per
    detector and a dead-letter query. Names are stable: a restarted job finds its checkpoints."""
    every = options.trigger_seconds
    if options.shared:
        return [QueryPlan(query_names.SHARED, tuple(names), options.with_dlq, trigger_seconds=every)]
    triggers = dict(options.group_triggers)
    plans, placed = [], set()
    for group, members in options.groups or ():
        chosen = tuple(n for n in names if n in members)
        if len(chosen) < min(2, len(members)) or not chosen:
            continue                          # one detector of a group runs as it would alone
        # Part of a group is a query of its own (another application may run the rest of the group).
        name = query_names.group(group, None if len(chosen) == len(members) else chosen)
        plans.append(QueryPlan(name, chosen, options.with_dlq and not plans,
                               trigger_seconds=triggers.get(group, every)))
        placed |= set(chosen)
    plans += [QueryPlan(query_names.alone(n), (n,), trigger_seconds=every) for n in names if n not in placed]
    if options.with_dlq and not any(p.with_dlq for p in plans):
        plans.append(QueryPlan(query_names.DLQ, (), True, trigger_seconds=every))
    return plans
