"""``python -m detectors params show|history|set|backtest NAME``: a running detector's parameters as data.

    params show velocity                      the parameters in force, their version, who set them and why
    params history velocity                   every change, oldest first
    params backtest velocity min_count=4 (--transactions F --labels F | --hours N)
                                              what-if: proposed and current side by side (detectors/whatif.py)
    params set velocity min_count=4 --reason "..." [--author A] [--checked]
                                              validate, then publish the new set (detectors/params_store.py);
                                              --checked: only after a what-if of exactly this change

The running job applies a change within seconds (spark_job/live_params.py). Every refusal is one line.
"""

from __future__ import annotations

import argparse
import getpass
import json
import tempfile
from pathlib import Path

from common.cli_errors import UNAVAILABLE, UserError, positive_float, readable_file
from common.param_records import ParamRecord
from common.settings import get_settings
from detectors import params as param_logic
from detectors import registry


def add_parser(sub) -> None:
    cmd = sub.add_parser("params", help="show, change and what-if a detector's parameters at run time",
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = cmd.add_subparsers(dest="action", required=True)
    for name, text in (("show", "the parameters in force"), ("history", "every change, oldest first")):
        action = actions.add_parser(name, help=text)
        action.add_argument("name", metavar="NAME")
        action.add_argument("--json", action="store_true", help="machine-readable output")
    setting = actions.add_parser("set", help="change parameters of a running detector")
    setting.add_argument("name", metavar="NAME")
    setting.add_argument("changes", nargs="+", metavar="KEY=VALUE")
    setting.add_argument("--reason", required=True, help="why (kept in the history)")
    setting.add_argument("--author", default=None, help="who (default: the login name)")
    setting.add_argument("--checked", action="store_true",
                         help="refuse unless `params backtest` ran this very change against the current version")
    what_if = actions.add_parser("backtest", help="what-if: proposed and current parameters side by side")
    what_if.add_argument("name", metavar="NAME")
    what_if.add_argument("changes", nargs="+", metavar="KEY=VALUE")
    source = what_if.add_mutually_exclusive_group(required=True)
    source.add_argument("--transactions", type=readable_file, metavar="FILE", help="JSONL of transactions")
    source.add_argument("--hours", type=positive_float, metavar="N",
                        help="the last N hours of the transactions topic, with the labels topic")
    what_if.add_argument("--labels", type=readable_file, metavar="FILE", help="JSONL labels (with --transactions)")
    what_if.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    detector = registry.get(args.name)
    settings = get_settings()
    if args.action == "set":
        changes = _changes(detector, args.changes)          # refused before the broker is asked anything
    from detectors import params_store

    records = params_store.current(settings)
    record = records.get(detector.name)
    try:
        now = param_logic.tuned(detector, record)
    except param_logic.ParamError as error:
        raise UserError(f"the record in force no longer fits the code: {error}") from None
    if args.action == "show":
        return _show(now, record, args.json)
    if args.action == "history":
        return _history(params_store.history(settings, detector.name), args.json)
    if args.action == "backtest":
        return _what_if(settings, now, _changes(now, args.changes), args)
    return _set(settings, now, changes, args)


def _changes(detector, words: list[str]) -> dict:
    try:
        return param_logic.parse_changes(detector, words)
    except param_logic.ParamError as error:
        raise UserError(str(error)) from None


def _show(detector, record: ParamRecord | None, as_json: bool) -> int:
    data = param_logic.as_data(detector)
    if as_json:
        print(json.dumps({"detector": detector.name, "version": detector.params_version, "params": data,
                          "set_at": record and record.set_at, "author": record and record.author,
                          "reason": record and record.reason}, indent=2))
        return 0
    origin = (f"version {record.version}, set {record.set_at} by {record.author}: {record.reason}"
              if record else "version 0: the defaults in the code")
    print(f"{detector.name} ({origin})")
    for name, value in data.items():
        print(f"    {name} = {value!r}")
    return 0


def _history(records: list[ParamRecord], as_json: bool) -> int:
    if as_json:
        print(json.dumps([r.__dict__ for r in records], indent=2))
        return 0
    if not records:
        print("no change recorded: the defaults in the code are in force")
    for r in records:
        params = ", ".join(f"{k}={v}" for k, v in r.params.items())
        checked = " (what-if checked)" if r.checked else ""
        print(f"v{r.version}  {r.set_at}  {r.author}: {r.reason}{checked}\n    {params}")
    return 0


def _what_if(settings, now, changes: dict, args: argparse.Namespace) -> int:
    from detectors import whatif

    proposed = now.with_params(**changes)
    registry_problem = registry.problem(proposed)
    if registry_problem:
        raise UserError(registry_problem, UNAVAILABLE)
    with tempfile.TemporaryDirectory(prefix="whatif-") as scratch:
        if args.transactions:
            if not args.labels:
                raise UserError("--transactions needs --labels")
            transactions, labels, source = args.transactions, args.labels, f"{args.transactions}"
        else:
            transactions, labels = whatif.from_topics(settings, args.hours, Path(scratch))
            source = f"last {args.hours:g} h of {settings.topic_transactions}"
        result = whatif.run(now, proposed, transactions, labels)
    whatif.save(settings, result, source)
    print(json.dumps(result, indent=2) if args.json else whatif.render(result), end="" if not args.json else "\n")
    return 0


def _set(settings, now, changes: dict, args: argparse.Namespace) -> int:
    from detectors import params_store, whatif

    proposed = now.with_params(**changes)
    if not param_logic.changed(now, changes):
        raise UserError(f"{now.name}: nothing changes (version {now.params_version} already has these values)")
    problem = registry.problem(proposed)
    if problem:
        raise UserError(problem)
    data = param_logic.as_data(proposed)
    checked = whatif.matching(settings, now.name, now.params_version, data)
    if args.checked and checked is None:
        raise UserError(f"{now.name}: --checked, but no what-if of this change against version "
                        f"{now.params_version}: run `python -m detectors params backtest {now.name} "
                        f"{' '.join(args.changes)} ...` first")
    if not args.reason.strip():
        raise UserError("--reason must say why")
    record = ParamRecord(detector=now.name, params=data, version=now.params_version + 1,
                         detector_version=now.version, author=args.author or getpass.getuser(),
                         reason=args.reason.strip(), set_at=params_store.now_text(), checked=checked)
    params_store.publish(settings, record)
    print(f"{now.name}: version {record.version} committed ("
          + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in param_logic.changed(now, changes).items()) + ")")
    return 0


