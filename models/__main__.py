"""``python -m models``: train, report and list the fraud models.

    python -m models train [--quick] [--if-missing] [--profile handbook|default] [--seed S] [--days N] [--folds F] [--models a,b,...]
    python -m models report [--version latest|NAME|VERSION] [--out DIR]
    python -m models list
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from common.cli_errors import ArgumentParser, UserError, positive_int, run_command
from models import estimators, training


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m models", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="simulate labelled data, train and compare models, register the best",
                           description="Simulate labelled data in process, build the features, run the "
                                       "Handbook's prequential train/delay/test protocol (validation folds, then "
                                       "test folds), register the model selected on validation and write the "
                                       "report.")
    train.add_argument("--quick", action="store_true",
                       help=f"a quick model (what `make demo` trains when none is registered): the same world "
                            f"and protocol with {training.QUICK_FOLDS} fold and one candidate "
                            f"({', '.join(training.QUICK_MODELS)}), ~30 s instead of ~4 min; --folds and "
                            f"--models still override it")
    train.add_argument("--profile", choices=("handbook", "default"), default="handbook",
                       help="simulator profile: handbook = Le Borgne et al.'s generator (default), default = ours")
    train.add_argument("--seed", type=int, default=1, help="simulator and model seed (default 1)")
    train.add_argument("--days", type=positive_int, default=None,
                       help="simulated days (default: what --folds needs, 114 for 4 folds): 37 days of warm-up "
                            "for the windows, then the validation folds, then the test folds")
    train.add_argument("--folds", type=positive_int, default=None,
                       help="prequential validation and test folds of one week each (default 4, the Handbook's; "
                            "--quick: 1)")
    train.add_argument("--customers", type=positive_int, default=None,
                       help="customers in the simulated world (default: the profile's, 5,000 / 10,000)")
    train.add_argument("--terminals", type=positive_int, default=None,
                       help="terminals in the simulated world, handbook profile only (default 10,000; keep about "
                            "2 per customer in a smaller world)")
    train.add_argument("--models", default=None,
                       help=f"comma-separated candidates (default: all; --quick: "
                            f"{','.join(training.QUICK_MODELS)}): "
                            f"{', '.join([*estimators.CANDIDATES, *estimators.EXTRA])}")
    train.add_argument("--registry", default=None, help="registry folder (default: settings.model_registry)")
    train.add_argument("--report-dir", default=None, help="report folder (default: artifacts/models)")
    train.add_argument("--no-report", action="store_true", help="do not write the report")
    train.add_argument("--verdicts", default=None, metavar="FILE",
                       help="JSONL of analysts' verdicts (records of cases.verdicts): the transactions of the "
                            "marked cases take the verdict as their label (common/verdicts.py)")
    train.add_argument("--if-missing", action="store_true",
                       help="do nothing when the registry's latest model is usable (the compose stack's one-shot "
                            "`train` service, which runs at every start)")

    report = sub.add_parser("report", help="write the Markdown + PNG report of a registered model",
                            description="Render artifacts/models/report.md and report.png from a registry version.")
    report.add_argument("--version", default="latest", help="latest (default), a model name or a version id")
    report.add_argument("--registry", default=None)
    report.add_argument("--out", default=None, help="output folder (default: artifacts/models)")

    listing = sub.add_parser("list", help="list the registered model versions")
    listing.add_argument("--registry", default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from models import registry

    if args.command == "train":
        if args.if_missing and (version := registry.latest_version(args.registry)) is not None:
            print(f"{version} in {registry.registry_dir(args.registry)} is usable: nothing to train (--if-missing)")
            return 0
        from models.data import DataSpec
        from models.report import DEFAULT_OUT, render
        from models.progress import terminal_progress
        from models.training import TrainConfig, train

        if args.terminals is not None and args.profile != "handbook":
            raise UserError("--terminals is for the handbook profile only")
        folds = args.folds or (training.QUICK_FOLDS if args.quick else 4)
        default_models = training.QUICK_MODELS if args.quick else tuple(estimators.CANDIDATES)
        names = (tuple(n.strip() for n in args.models.split(",") if n.strip()) if args.models is not None
                 else default_models)
        if not names:
            raise UserError("--models is empty: name at least one model")
        for name in names:
            try:
                estimators.make(name, 0)        # unknown names fail before any work
            except ValueError as error:
                raise UserError(f"--models: {error}") from None
        started = time.monotonic()
        needed = TrainConfig(folds=folds).days_needed()
        if args.days is not None and args.days < needed:
            raise UserError(f"--days {args.days} is too few for {folds} validation and test folds after "
                            f"the warm-up: use --days >= {needed} (or leave it out)")
        days = args.days or needed
        config = TrainConfig(data=DataSpec(args.profile, args.seed, days, args.customers, args.terminals),
                             models=names, folds=folds)
        transactions = None
        if args.verdicts:
            from models.data import simulate

            transactions = simulate(config.data)
            matched = training.apply_verdicts(transactions, read_verdicts(args.verdicts))
            print(f"{matched} simulated transactions labelled by the verdicts of {args.verdicts}")
        with terminal_progress() as progress:
            artifact, predictions, _ = train(config, transactions, progress=progress)
        if args.quick:      # told apart in `models list`; `make train` registers a full one
            artifact.name += "-quick"
            artifact.meta["preset"] = "quick"
        version = registry.save(artifact, args.registry, predictions=predictions)
        print(f"registered {artifact.name} as {version} in {registry.registry_dir(args.registry)} "
              f"({time.monotonic() - started:.0f} s)")
        if not args.no_report:
            path = render(artifact.meta, predictions, args.report_dir or DEFAULT_OUT)
            print(f"report: {path}")
        return 0
    if args.command == "report":
        from models.report import DEFAULT_OUT, render

        artifact = registry.load(args.version, args.registry, with_table=False)
        path = render(artifact.meta, registry.predictions(args.version, args.registry), args.out or DEFAULT_OUT)
        print(f"report: {path}")
        return 0
    if args.command == "list":
        for meta in registry.versions(args.registry):
            test = meta["metrics"][meta["selected"]]["test"] if "metrics" in meta else {}
            try:
                registry.check_features(meta)
                stale = ""
            except registry.FeatureMismatchError:
                stale = "  (trained on other features: unusable, retrain)"
            print(f"{meta['version']}  {meta['name']:<40} AUC {test.get('auc_roc', float('nan')):.3f}  "
                  f"CP@100 {test.get('card_precision@100', float('nan')):.3f}  threshold {meta['threshold']:.4f}"
                  f"{stale}")
        return 0
    return 2


def read_verdicts(path: str) -> list[dict]:
    from pathlib import Path

    from common.contracts import ContractError
    from common.verdicts import decode_verdict

    try:
        lines = [line for line in Path(path).read_bytes().splitlines() if line.strip()]
        return [decode_verdict(line) for line in lines]
    except ContractError as error:
        raise UserError(f"--verdicts {path}: {error}") from None


def _registry_errors() -> tuple[type[BaseException], ...]:
    from models.registry import RegistryError

    return (RegistryError,)


if __name__ == "__main__":
    sys.exit(run_command(main, "python -m models", expected=_registry_errors()))
