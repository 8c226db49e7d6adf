"""Command line of the detectors (docs/architecture.md, "Entry points").

    python -m detectors list
    python -m detectors run [NAME ...] [runner options]    (hands over to python -m spark_job)
    python -m detectors backtest [NAME ...] --transactions FILE --labels FILE --out DIR
    python -m detectors params show|history|set|backtest NAME ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from common.cli_errors import UNAVAILABLE, USAGE, ArgumentParser, UserError, fail, readable_file, run_command, warn
from common.settings import get_settings
from detectors import params_cli, registry

PROG = "python -m detectors"


def cmd_list(args: argparse.Namespace) -> int:
    detectors = registry.resolve(args.names)
    if args.json:
        print(json.dumps([{"name": d.name, "version": d.version, "description": d.description,
                           "watermark": d.watermark, "scenarios": list(d.scenarios),
                           "params": d.describe_params()} for d in detectors], indent=2))
        return 0
    for d in detectors:
        print(f"{d.name} {d.version}  watermark={d.watermark}  scenarios={','.join(d.scenarios) or '-'}")
        print(f"    {d.description}")
        for key, value in d.describe_params().items():
            print(f"    {key} = {value!r}")
    return 0


def cmd_backtest(args: argparse.Namespace) -> int:
    from detectors import backtest

    detectors = registry.resolve(args.names)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)         # before Spark starts, like the input files' checks
    except OSError as error:
        raise UserError(f"cannot write to --out {out}: {error.strerror or error}") from None
    if not (args.labels or args.verdicts or args.verdicts_topic):
        raise UserError("give --labels, --verdicts FILE or --verdicts-topic (or labels and verdicts)")
    analysts = load_verdicts(args) if args.verdicts or args.verdicts_topic else None
    detectors = ready_for_backtest(detectors, named=bool(args.names))
    report = backtest.run(detectors, args.transactions, args.labels, out,
                          log=lambda msg: print(msg, file=sys.stderr), verdicts=analysts)
    print(backtest.markdown(report))
    return 0


def load_verdicts(args: argparse.Namespace) -> list[dict]:
    """The verdict records of ``--verdicts FILE`` or the verdicts topic; unreadable ones are left out
    with a one-line note."""
    from common.contracts import ContractError
    from common.verdicts import decode_verdict

    if args.verdicts:
        raws = [line for line in Path(args.verdicts).read_bytes().splitlines() if line.strip()]
    else:
        from common.kafka_io import read_topic
        raws = [r.value for r in read_topic(get_settings(), get_settings().topic_verdicts)]
    verdicts, bad = [], 0
    for raw in raws:
        try:
            verdicts.append(decode_verdict(raw))
        except ContractError:
            bad += 1
    if bad:
        warn(f"{PROG} backtest", f"{bad} verdict records could not be read, left out")
    return verdicts


def ready_for_backtest(detectors: list, named: bool) -> list:
    """The detectors a backtest can run. One that cannot start (``registry.problem``, e.g. ml_score
    without a trained model) is a one-line error when it was named, and is left out with a one-line
    note on stderr when the backtest runs them all; both before Spark starts."""
    found = {d.name: registry.problem(d) for d in detectors}
    if named and any(found.values()):
        raise UserError("; ".join(p for p in found.values() if p), UNAVAILABLE)
    for name, problem in found.items():
        if problem:
            warn(f"{PROG} backtest", f"{name} left out: {problem.removeprefix(name + ': ')}")
    ready = [d for d in detectors if not found[d.name]]
    if not ready:
        raise UserError("no detector can run", UNAVAILABLE)
    return ready


def hand_over_to_the_job(argv: list[str]) -> int:
    """``run``: the job is ``python -m spark_job``; the analyst's package never imports it (no package
    cycle), so the process becomes the job, with this command's name in its messages."""
    command = [sys.executable, "-m", "spark_job", f"--prog={PROG} run", *argv]
    sys.stdout.flush(), sys.stderr.flush()
    os.execv(sys.executable, command)
    return 0   # not reached: execv replaces the process


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    listing = sub.add_parser("list", help="the registered detectors with version, watermark, scenarios, params")
    listing.add_argument("names", nargs="*", metavar="NAME", help="only these (default: all)")
    listing.add_argument("--json", action="store_true", help="machine-readable output")

    sub.add_parser("run", add_help=False,
                   help="run detectors as streaming queries (python -m spark_job; `run --help` lists its options)")

    back = sub.add_parser("backtest", help="score detectors on a transactions file against labels")
    back.add_argument("names", nargs="*", metavar="NAME", help="detectors to score (default: all)")
    back.add_argument("--transactions", required=True, type=readable_file, metavar="FILE",
                      help="JSONL of transactions (transaction contract); lines that break it are counted, "
                           "reported and left out")
    back.add_argument("--labels", type=readable_file, metavar="FILE",
                      help="JSONL labels {txn_id, is_fraud, scenario}; unreadable lines are counted and reported")
    verdicts = back.add_mutually_exclusive_group()
    verdicts.add_argument("--verdicts", type=readable_file, metavar="FILE",
                          help="JSONL of analysts' verdicts (records of cases.verdicts): the transactions of a "
                               "case marked fraud / not fraud are labelled so, over --labels (common/verdicts.py)")
    verdicts.add_argument("--verdicts-topic", action="store_true",
                          help="the same from the verdicts topic (FRAUD_TOPIC_VERDICTS, read committed)")
    back.add_argument("--out", required=True, help="directory for alerts.jsonl, report.json, report.md")
    params_cli.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["run"]:
        return hand_over_to_the_job(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == "params":
        return params_cli.run(args)
    return cmd_list(args) if args.command == "list" else cmd_backtest(args)


if __name__ == "__main__":
    sys.exit(run_command(main, PROG, expected=(registry.UnknownDetectorError,), expected_exit_code=USAGE))
