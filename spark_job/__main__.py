"""``python -m spark_job [NAME ...] [options]``: the detector job (``python -m detectors run`` hands over here)."""

from __future__ import annotations

import argparse
import sys

from common.cli_errors import USAGE, ArgumentParser, fail, run_command
from common.settings import get_settings
from detectors import registry
from spark_job import options

PROG = "python -m spark_job"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=prog, description="The detector job (spark_job): the detectors' streaming "
                                                   "queries on the transactions topic and the dead letters.")
    parser.add_argument("names", nargs="*", metavar="NAME", help="detectors to run (default: all)")
    options.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    for name in args.names:
        registry.get(name)            # fail fast on a typo, before Spark starts
    for _, members in options.parse_groups(args.groups or get_settings().detector_groups):
        for name in members:
            registry.get(name)        # a group naming no registered detector is a typo: say so now
    problems = registry.problems(registry.resolve(args.names))
    if problems:                      # e.g. ml_score without a trained model: say what to do, start nothing
        return fail(prog, "; ".join(problems), USAGE)
    from spark_job import job          # PySpark: imported only once the command line is known good

    return job.run(args.names, args) or 0


if __name__ == "__main__":
    # `python -m detectors run` execs this module with its program name, so errors name the command typed.
    prog = sys.argv.pop(1).removeprefix("--prog=") if sys.argv[1:2] and sys.argv[1].startswith("--prog=") else PROG
    sys.exit(run_command(lambda: main(sys.argv[1:], prog), prog,
                         expected=(registry.UnknownDetectorError,), expected_exit_code=USAGE))
