"""Command line of the producers (docs/architecture.md, "Entry points"):

    python -m producers simulate --seed S --count N --out DIR   # DIR/transactions.jsonl, labels.jsonl, reference.json
    python -m producers simulate --seed S --count N             # to the transactions topic, labels to the labels topic
    python -m producers replay FILE [--raw] [--speedup X]       # any JSONL in the contract -> transactions topic
    python -m producers load-reference [--seed S]               # customer, card, merchant profiles -> Redis
    python -m producers scenarios                               # every scenario, its unit and default rates

Hosts and topics come from ``common.settings`` (``python -m deploy settings`` lists the variables).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from common.cli_errors import (ArgumentParser, CONNECT_CHECK_SECONDS, fraction, non_negative_float, positive_float,
                               positive_int, readable_file, run_command)
from producers import scenarios

EPILOG = "Kafka, Redis and topic names come from FRAUD_* environment variables (python -m deploy settings)."


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as exc:
        parser.error(str(exc))
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m producers", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="simulate labelled transactions to files or Kafka",
                         formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_scenario_help(),
                         description="Simulate card transactions with labelled fraud scenarios. Deterministic: "
                                     "the same flags give the same bytes.")
    _world_args(sim)
    bound = sim.add_argument_group("how much")
    bound.add_argument("--count", type=positive_int, help="number of transactions")
    bound.add_argument("--duration", type=positive_float, help="stop after this many wall-clock seconds")
    bound.add_argument("--rate", type=positive_float, default=None,
                       help="events per second (default: as fast as possible)")
    scen = sim.add_argument_group("scenarios and event-time realism")
    scen.add_argument("--scenario", action="append", metavar="NAME=RATE", default=[],
                      help="set a scenario's rate (repeatable); units in the list below")
    scen.add_argument("--no-scenario", action="append", metavar="NAME", default=[], help="switch a scenario off")
    scen.add_argument("--only", action="append", metavar="NAME",
                      help="switch every scenario off except these (repeatable)")
    scen.add_argument("--jitter-seconds", type=non_negative_float, default=3.0,
                      help="out-of-order arrival: each event arrives 0..this many seconds after its event time")
    scen.add_argument("--late-fraction", type=fraction, default=0.005, help="share of events arriving minutes late")
    scen.add_argument("--late-minutes", type=_pair, default=(2.0, 15.0), metavar="LO,HI",
                      help="how late a late event is, in minutes (default 2,15)")
    out = sim.add_argument_group("where to")
    out.add_argument("--out", type=Path, metavar="DIR",
                     help="write DIR/transactions.jsonl, DIR/labels.jsonl, DIR/reference.json (no Kafka)")
    out.add_argument("--topic", help="transactions topic (default: FRAUD_TOPIC_TRANSACTIONS)")
    out.add_argument("--labels-topic", help="labels topic (default: FRAUD_TOPIC_LABELS)")
    out.add_argument("--no-labels-topic", action="store_true", help="do not publish labels to Kafka")
    out.add_argument("--all-labels", action="store_true",
                     help="publish a label for every transaction (default: fraud, look-alike and late ones; "
                          "missing = ordinary legitimate)")
    out.add_argument("--labels-out", type=Path, metavar="FILE", help="also write every label to this JSONL file")
    _kafka_args(sim)
    sim.set_defaults(func=cmd_simulate)

    rep = sub.add_parser("replay", help="publish a JSONL file of transactions",
                         description="Publish FILE (one transaction per line) to the transactions topic, key = "
                                     "card_id. A file with a line that breaks the contract is refused whole: each "
                                     "bad line is reported with its number, nothing is published, exit code 2. "
                                     "With --raw every line is published as its exact bytes, bad ones included "
                                     "(key = card_id if readable, else null), to exercise the dead-letter path.",
                         epilog=EPILOG)
    rep.add_argument("file", type=readable_file, metavar="FILE")
    rep.add_argument("--raw", action="store_true", help="publish contract-breaking lines as they are")
    rep.add_argument("--speedup", type=positive_float, help="pace by event time, X times faster than real time "
                                                            "(default: as fast as possible)")
    rep.add_argument("--rate", type=positive_float, default=None,
                     help="at most this many events per second (default: no limit)")
    rep.add_argument("--topic", help="target topic (default: FRAUD_TOPIC_TRANSACTIONS)")
    _kafka_args(rep)
    rep.set_defaults(func=cmd_replay)

    ref = sub.add_parser("load-reference", help="load customer, card and merchant profiles into Redis",
                         description="HSET the simulated world's profiles under profile:customer:*, "
                                     "profile:card:*, profile:merchant:* (pipelined, idempotent). Use the same "
                                     "--seed/--profile/--customers as the simulation.", epilog=EPILOG)
    _world_args(ref)
    ref.set_defaults(func=cmd_load_reference)

    lst = sub.add_parser("scenarios", help="list the scenarios, their units and default rates")
    lst.set_defaults(func=cmd_scenarios)
    return parser


def _world_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("world")
    g.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g.add_argument("--profile", choices=["default", "handbook"], default="default",
                   help="default: cities, e-commerce, ATMs, all scenarios; handbook: Le Borgne et al.'s "
                        "simulator (5,000 customers, 10,000 terminals, radius 5) and its three scenarios")
    g.add_argument("--customers", type=positive_int, help="number of customers (default 10,000; handbook 5,000)")
    g.add_argument("--start", type=_start, help="first simulated day, ISO date or 'now' "
                                                "(default 2026-01-05; handbook 2018-04-01)")
    g.add_argument("--id-prefix", default="", help="prefix every id (keeps parallel runs apart)")


def _kafka_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("kafka")
    g.add_argument("--compression", default="auto", choices=["auto", "none", "gzip", "lz4", "zstd", "snappy"],
                   help="producer compression (auto: lz4 if installed, else none)")
    g.add_argument("--progress", dest="progress", action="store_true", default=None,
                   help="force the progress bar (default: on a terminal, off when CI=true)")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")


def _pair(text: str) -> tuple[float, float]:
    lo, _, hi = text.partition(",")
    try:
        pair = (float(lo), float(hi))
    except ValueError:
        raise argparse.ArgumentTypeError("expected LO,HI") from None
    if not 0 <= pair[0] <= pair[1]:
        raise argparse.ArgumentTypeError("expected 0 <= LO <= HI")
    return pair


def _start(text: str) -> datetime:
    if text == "now":
        now = datetime.now(timezone.utc)
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _scenario_help() -> str:
    rows = ["scenarios (NAME  unit  default/handbook rate  what):"]
    units = {"per_txn": "incidents per ordinary transaction", "per_day": "new per simulated day",
             "switch": "on if > 0"}
    for s in scenarios.SCENARIOS:
        rows.append(f"  {s.name:<38} {s.default:g}/{s.handbook:g}  ({units[s.unit]})\n      {s.help}")
    rows.append("\nlabels: {\"txn_id\", \"is_fraud\", \"scenario\" ('none' = ordinary), \"late\"}.\n" + EPILOG)
    return "\n".join(rows)


def _simulator(args):
    from producers.simulator import SimConfig, Simulator

    rates = scenarios.parse_rates(args.profile, getattr(args, "scenario", None),
                                  getattr(args, "no_scenario", None), getattr(args, "only", None))
    config = SimConfig(seed=args.seed, profile=args.profile, start=args.start, customers=args.customers,
                       rates=rates, id_prefix=args.id_prefix,
                       jitter_s=getattr(args, "jitter_seconds", 3.0),
                       late_fraction=getattr(args, "late_fraction", 0.005),
                       late_minutes=getattr(args, "late_minutes", (2.0, 15.0)))
    return Simulator(config)


def cmd_simulate(args) -> int:
    from common.kafka_clients import check_kafka_connection
    from common.settings import get_settings
    from producers.publish import progress_enabled
    from producers.simulate import publish, write_files

    if args.count is None and args.duration is None:
        raise ValueError("give --count N or --duration SECONDS")
    if not args.out:
        settings = get_settings()
        check_kafka_connection(settings, timeout=CONNECT_CHECK_SECONDS)   # before the world is built
    sim = _simulator(args)
    progress = progress_enabled(args.progress)
    if args.out:
        stats = write_files(sim, args.out, args.count, args.duration, progress=progress)
        _summary("written", stats, args.out)
        return 0
    labels_topic = None if args.no_labels_topic else (args.labels_topic or settings.topic_labels)
    stats = publish(sim, settings, args.topic or settings.topic_transactions, args.count, args.duration,
                    args.rate or 0.0, labels_topic=labels_topic, labels_file=args.labels_out,
                    all_labels=args.all_labels, progress=progress, compression=args.compression)
    _summary("sent", stats, args.topic or settings.topic_transactions)
    return 0 if stats.failed == 0 and stats.unconfirmed == 0 and stats.label_failed == 0 else 1


def cmd_replay(args) -> int:
    from common.kafka_clients import check_kafka_connection
    from common.settings import get_settings
    from producers.publish import progress_enabled
    from producers.replay import publish_file

    settings = get_settings()
    topic = args.topic or settings.topic_transactions

    def report(line):
        print(f"{args.file}:{line.number}: {line.problem}" + (" (published raw)" if args.raw else ""),
              file=sys.stderr)

    if not args.file.exists():
        raise ValueError(f"no such file: {args.file}")
    check_kafka_connection(settings, timeout=CONNECT_CHECK_SECONDS)
    stats, bad = publish_file(settings, args.file, topic, raw=args.raw, speedup=args.speedup, rate=args.rate or 0.0,
                              progress=progress_enabled(args.progress), compression=args.compression,
                              report=report)
    if bad and not args.raw:
        print(f"refused: {len(bad)} line(s) break the transaction contract; nothing published "
              f"(use --raw to publish them as they are)", file=sys.stderr)
        return 2
    _summary("sent", stats, topic, extra={"raw_contract_breaking": len(bad)})
    return 0 if stats.failed == 0 and stats.unconfirmed == 0 else 1


def cmd_load_reference(args) -> int:
    import time

    from common.redis_clients import check_redis, redis_client
    from common.settings import get_settings
    from producers.reference import load_reference
    from producers.world import build_world

    settings = get_settings()
    check_redis(settings, timeout=CONNECT_CHECK_SECONDS)       # before the world is built
    world = build_world(args.profile, args.seed, args.start, args.customers, args.id_prefix)
    client = redis_client(settings)
    started = time.monotonic()
    counts = load_reference(client, world)
    client.close()
    print(json.dumps({"loaded": counts, "elapsed_s": round(time.monotonic() - started, 3)}))
    return 0


def cmd_scenarios(args) -> int:
    print(_scenario_help())
    return 0


def _summary(verb: str, stats, where, extra: dict | None = None) -> None:
    summary = dict(stats.summary(), target=str(where), **(extra or {}))
    print(f"{verb} {summary['sent']:,} transactions to {where}: failed {summary['failed']}, "
          f"{summary['rate_per_s']:,.0f}/s over {summary['elapsed_s']:.1f} s", file=sys.stderr)
    print(json.dumps(summary))


if __name__ == "__main__":
    sys.exit(run_command(main, "python -m producers"))
