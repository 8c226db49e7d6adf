"""The detector job's health, for a container's health check (deploy/docker-compose.yml): every query
of the job's plan has reported progress (``spark_job.progress``: ``<run_dir>/progress/<query>.json``)
since the job's process started, so a container restarted with the files of its previous run is not
healthy before its queries run again, and within the last ``--within`` seconds, so a query that stopped
(its restarts given up) while the others run makes the job unhealthy. An idle query reports too (Spark
emits a progress event for triggers without data every 10 s).

    python -m spark_job.health [NAME ...]     the names given to `python -m detectors run` (default: all)
                                              [--pid N]  the job's process (default 1, a container's)
                                              [--within S]  seconds (default 300: a long batch reports late)

Exit 0 healthy, 1 not, with one line saying which queries have not reported.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def process_start_time(pid: int, proc: Path = Path("/proc")) -> float:
    """When process ``pid`` started, in seconds since the epoch (Linux: its start tick after boot)."""
    stat = (proc / str(pid) / "stat").read_text()
    ticks = int(stat.rsplit(")", 1)[1].split()[19])            # field 22, counted after the command name
    boot = next(float(line.split()[1]) for line in (proc / "stat").read_text().splitlines()
                if line.startswith("btime "))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


def silent_queries(progress_dir: Path, queries: list[str], since: float) -> list[str]:
    """The queries with no progress file written at or after ``since``."""
    def reported(query: str) -> bool:
        path = progress_dir / f"{query}.json"
        return path.exists() and path.stat().st_mtime >= since
    return [query for query in queries if not reported(query)]


def planned_queries(names: list[str]) -> list[str]:
    """The queries ``python -m detectors run NAMES`` runs with the settings' detector groups."""
    from common.settings import get_settings
    from detectors import registry
    from spark_job.options import RunOptions, parse_groups, plan_queries

    detectors = [registry.get(name).name for name in names] if names else registry.names()
    options = RunOptions(groups=parse_groups(get_settings().detector_groups))
    return [plan.name for plan in plan_queries(detectors, options)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_job.health", description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME")
    parser.add_argument("--pid", type=int, default=1)
    parser.add_argument("--within", type=float, default=300.0)
    args = parser.parse_args(argv)
    import time

    from common.settings import get_settings

    queries = planned_queries(args.names)
    since = max(process_start_time(args.pid), time.time() - args.within)
    silent = silent_queries(get_settings().run_dir / "progress", queries, since)
    if silent:
        print(f"no progress since the job started or in the last {args.within:g} s: {', '.join(silent)}")
        return 1
    print(f"every query reported progress: {', '.join(queries)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
