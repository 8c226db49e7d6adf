"""The pipeline benchmark's Spark variants on the local cluster's standalone master beside ``local[2]``,
in one run, on the same data (docs/cluster.md, "What the cluster costs").

    python -m bench.cluster [--count N] [--cards N] [--variants NAME ...]

Needs ``make cluster-up``. The data goes once to a topic on the cluster's three brokers (replication 3);
each side then runs the same variants in a Spark child of its own (``bench.spark_child``: a warm-up, then
each variant from the earliest offset with a fresh checkpoint, exactly-once writer): first with
``FRAUD_SPARK_MASTER=local[2]``, then with the standalone master (two executors of one core each).
Writes ``artifacts/bench/<run>/cluster.json`` and ``cluster.md``: tx/s of each side, their ratio, and
the distinct alerts of each side (the same input must give the same alerts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import datetime

from bench import suites
from common.cli_errors import ArgumentParser, fail, run_command
from common.settings import REPO_ROOT, get_settings
from deploy import cluster
from deploy.processes import ProcessGroup

PROG = "python -m bench.cluster"
DEFAULT_VARIANTS = ("spark_ds_velocity", "spark_all_shared")
# The same driver heap on both sides; the cluster's executors take FRAUD_CLUSTER_SPARK_EXECUTOR_MEMORY each.
DRIVER_MEMORY = "2g"


def sides(settings) -> dict[str, dict[str, str]]:
    clustered = cluster.cluster_settings(settings)
    return {"local[2]": {"FRAUD_SPARK_MASTER": "local[2]", "FRAUD_SPARK_DRIVER_MEMORY": DRIVER_MEMORY},
            # SparkContext takes the executors' heap from SPARK_EXECUTOR_MEMORY when no spark.executor.memory is set
            "standalone": {"FRAUD_SPARK_MASTER": clustered.spark_master, "FRAUD_SPARK_DRIVER_MEMORY": DRIVER_MEMORY,
                           "SPARK_EXECUTOR_MEMORY": settings.cluster_spark_executor_memory}}


def compare(count: int, cards: int, variants: list[str], log=print) -> dict:
    base = get_settings()
    if cluster.live_brokers(base) != 3 or len(cluster.alive_workers(base)) < 2:
        raise cluster.StackError("the local cluster is not running (3 brokers, 2 Spark workers): `make cluster-up` first")
    settings = cluster.cluster_settings(base)
    sizes = suites.Sizes.for_mode(quick=True)
    sizes.count, sizes.cards = count, [cards]
    run_id = "cluster-" + datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = REPO_ROOT / "artifacts" / "bench" / run_id
    (out_dir / "tmp").mkdir(parents=True, exist_ok=True)
    results: dict = {"run_id": run_id, "count": count, "cards": cards, "sides": {}}
    with ProcessGroup(out_dir / "logs", base_env=dict(os.environ, PYTHONUNBUFFERED="1")) as procs:
        run = suites.BenchRun(settings, sizes, run_id, out_dir, procs, log=log)
        try:
            data = run.dataset(cards)
            for side, env in sides(base).items():
                run.set_phase(f"{side}: {', '.join(variants)} on {count:,} transactions")
                warm = suites.spark_plan_run(run, "warmup", suites.DS_VEL, True, "exactly-once", data,
                                             expected=1000, timeout=150)
                warm["max_offsets_per_trigger"] = 1000
                plan = [warm] + [suites.spark_plan_run(run, name, *suites.SPARK_VARIANTS[name], data) for name in variants]
                spark = suites.run_spark_plan(run, f"cluster-bench-{side.strip('[]2')}", plan,
                                              240 + sum(p["timeout_s"] + 30 for p in plan), env=env)
                results["sides"][side] = {r["name"]: {**r, "session_start_s": spark["session_start_s"]}
                                          for r in spark["runs"][1:]}
                for r in spark["runs"][1:]:
                    log(f"    {side:<11} {r['name']:<20} {r['tx_per_second'] or 0:>8,.0f} tx/s  rows {r['rows']:,}"
                        f"{' (capped)' if r['capped'] else ''}  session start {spark['session_start_s']:.1f} s")
        finally:
            run.cleanup()
    results["table"] = table(results, variants)
    (out_dir / "cluster.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    (out_dir / "cluster.md").write_text(results["table"] + "\n")
    results["out_dir"] = str(out_dir)
    return results


def table(results: dict, variants: list[str]) -> str:
    local, standalone = results["sides"]["local[2]"], results["sides"]["standalone"]
    lines = [f"{results['count']:,} transactions over {results['cards']:,} cards, read from 3 brokers (replication 3)",
             "", "| variant | local[2] tx/s | standalone (2 executors x 1 core) tx/s | standalone / local | "
             "session start local / standalone (s) | distinct alerts local / standalone |",
             "|---|---:|---:|---:|---:|---:|"]
    for name in variants:
        a, b = local.get(name, {}), standalone.get(name, {})
        ta, tb = a.get("tx_per_second") or 0, b.get("tx_per_second") or 0
        ratio = f"{tb / ta:.2f}" if ta else "n/a"
        capped = lambda r: " (capped)" if r.get("capped") else ""  # noqa: E731
        lines.append(f"| {name} | {ta:,.0f}{capped(a)} | {tb:,.0f}{capped(b)} | {ratio} | "
                     f"{a.get('session_start_s', 0):.1f} / {b.get('session_start_s', 0):.1f} | "
                     f"{a.get('alerts', {}).get('distinct_alert_ids', 0):,} / "
                     f"{b.get('alerts', {}).get('distinct_alert_ids', 0):,} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=20_000, help="transactions (default 20,000)")
    parser.add_argument("--cards", type=int, default=10_000, help="distinct cards (default 10,000)")
    parser.add_argument("--variants", nargs="+", default=list(DEFAULT_VARIANTS), choices=sorted(suites.SPARK_VARIANTS),
                        metavar="NAME", help=f"pipeline variants (default {' '.join(DEFAULT_VARIANTS)})")
    args = parser.parse_args(argv)
    try:
        results = compare(args.count, args.cards, args.variants)
    except cluster.StackError as error:
        return fail(PROG, str(error), 1)
    print(f"\n{results['table']}\n\nwritten to {results['out_dir']}/cluster.md")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main, PROG))
