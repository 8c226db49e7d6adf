"""``make bench``: every benchmark of the project against the local stack, variants side by side.

    python -m bench [--quick] [--only NAME ...] [--count N] [--cards N ...]

Benchmarks (NAME):
  producer      bench/producer_throughput.py: the simulator vs kafka-python's raw producer
  pipeline      sustained tx/s from Kafka (earliest offset to the end) at each card population:
                Spark with all built-in detectors (one query per detector vs one shared read), double_swipe
                alone, double_swipe + velocity with the exactly-once writer and with Spark's built-in
                Kafka sink; and the baselines on the same input: kafka-python consumer (1 process, and
                2 in one consumer group) and a Faust agent (bench/baselines/)
  python, faust only those baselines of ``pipeline`` (quick plumbing checks)
  latency       p50/p99 event-to-alert latency at fixed loads (event_time = now)
  exactly-once  the same query with the exactly-once writer vs the built-in sink, in one JVM: taken from
                ``pipeline`` when it ran (double_swipe + velocity, a pair per card population, order
                alternating), else its own double_swipe runs
  demo          whole ``python -m demo`` runs (all five detectors, exactly once, the services) at several
                rates, the query groups beside one query per detector: p99 per detector, lag, last alert
                (bench/demo_latency.py)
  metrics       the detector job with its Prometheus metrics on and off (FRAUD_METRICS_ENABLED), short
                rounds in ABBA order in one JVM, /metrics scraped every 5 s: their cost in CPU seconds
                per 1,000 transactions, in throughput and as time inside metrics code (docs/metrics.md)
  memory        peak RSS of the JVM and Python workers (and of the baselines) vs distinct cards
                (from ``pipeline`` when it ran, else its own shorter runs)

Writes artifacts/bench/<run>/results.json (one per run: machine, load average samples, every figure),
results.md (the table, targets beside measured values) and PNG plots. Uses per-run topics
``bench.<run>.*`` (deleted at the end) on the running local stack (started if it is not).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import traceback
from datetime import datetime, timezone

from bench import demo_latency, report, suites
from bench.procs import machine
from common.settings import REPO_ROOT, Settings, get_settings
from deploy.processes import ProcessGroup

NAMES = ("producer", "pipeline", "python", "faust", "latency", "demo", "exactly-once", "metrics", "memory")
NOTES = [
    "Throughput = rows / (end of the last micro-batch − start of the first batch with data), from the "
    "queries' progress (JVM start and planning excluded); for the baselines rows / (last − first record "
    "processed). In per-query mode every query reads all rows; the figure is transactions through the "
    "whole pipeline per second.",
    "Input is the benchmark's own lightweight generator in the transaction contract (bench/workload.py), "
    "not the simulator: the simulator's world building does not reach 1M cards in reasonable time, and its "
    "event-time density (~0.3 tx/s per 10k cards) would leave the stateful operators almost empty. Event "
    "time advances at 100 tx/s, so double_swipe keeps ~3 min ≈ 18k transactions in its join state.",
    "Baselines decode and validate every record with the contract's own decode_transaction (DLQ on "
    "failure), keep bounded state, write alerts in the contract to Kafka and commit offsets only after "
    "the producer flushed (at-least-once, like Spark's built-in sink). Their watermark is per process.",
    "Latency = time a read_committed consumer received the alert − the alert's event_time (the second "
    "swipe's wall-clock time); the exactly-once writer's alerts become visible at commit. Short windows "
    "(see the latency section), one variant after the other, loads ascending; a variant that cannot drain "
    "a load is marked saturated and not given higher loads.",
]


def spark_settings() -> dict:
    """The settings the run's Spark children start with (this environment and ``suites.SPARK_ENV``):
    A/B runs change the collector, the code generation mode, ... by environment variables."""
    settings = Settings.from_env(environ={**os.environ, **suites.SPARK_ENV})
    return {name: str(value) for name, value in vars(settings).items()
            if name.startswith("spark_") and name not in ("spark_jars_dir", "spark_job_jar")}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short form (make bench-quick)")
    parser.add_argument("--only", nargs="+", choices=NAMES, metavar="NAME", help=f"some of: {', '.join(NAMES)}")
    parser.add_argument("--count", type=int, help="transactions pre-loaded per card population")
    parser.add_argument("--cards", type=int, nargs="+", help="card populations (default 10k 100k 1M; quick 10k 100k)")
    parser.add_argument("--loads", type=int, nargs="+", help="latency loads in tx/s")
    parser.add_argument("--latency-window", type=float, help="seconds measured per latency point")
    parser.add_argument("--latency-variants", nargs="+", choices=suites.LATENCY_VARIANTS,
                        default=list(suites.LATENCY_VARIANTS), help="variants of the latency benchmark")
    parser.add_argument("--demo-rates", type=int, nargs="+", help="rates of the demo benchmark in tx/s")
    parser.add_argument("--demo-duration", type=float, help="seconds of traffic per demo run")
    parser.add_argument("--demo-variants", nargs="+", choices=demo_latency.VARIANTS,
                        default=list(demo_latency.DEFAULT_VARIANTS),
                        help="variants of the demo benchmark, alternated (default: local untuned)")
    parser.add_argument("--demo-repeats", type=int, default=1, help="runs of each demo variant per rate")
    parser.add_argument("--spark-variants", nargs="+", choices=list(suites.SPARK_VARIANTS),
                        help="Spark variants of the pipeline benchmark (default: all)")
    parser.add_argument("--spark-repeats", type=int, default=1,
                        help="runs of each Spark variant of the pipeline benchmark, the order reversed every round")
    parser.add_argument("--no-baselines", action="store_true",
                        help="the pipeline benchmark without its kafka-python and Faust baselines")
    parser.add_argument("--spark-timeout", type=float, help="cap in seconds per Spark variant")
    parser.add_argument("--metrics-rounds", type=int, help="on/off pairs of the metrics benchmark (default 8)")
    parser.add_argument("--metrics-rows", type=int, help="transactions per run of the metrics benchmark")
    parser.add_argument("--run-id", help="name of the run folder (default: a timestamp)")
    args = parser.parse_args(argv)
    selected = list(args.only or ("producer", "pipeline", "latency", "demo", "exactly-once", "metrics", "memory"))

    settings = get_settings()
    from deploy import local_stack

    if not local_stack.broker_ready(settings):
        local_stack.up(settings)
    local_stack.fetch_spark_jars(settings)

    sizes = suites.Sizes.for_mode(args.quick)
    if args.count:
        sizes.count = args.count
    if args.cards:
        sizes.cards = args.cards
    if args.loads:
        sizes.latency_loads = args.loads
    if args.spark_timeout:
        sizes.spark_timeout_s = args.spark_timeout
        sizes.slow_timeout_s = max(args.spark_timeout, sizes.slow_timeout_s)
    if args.latency_window:
        sizes.latency_window_s = args.latency_window
    if args.metrics_rounds:
        sizes.metrics_rounds = args.metrics_rounds
    if args.metrics_rows:
        sizes.metrics_rows = args.metrics_rows
    run_id = args.run_id or datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = REPO_ROOT / "artifacts" / "bench" / run_id
    (out_dir / "tmp").mkdir(parents=True, exist_ok=True)
    results: dict = {"run_id": run_id, "quick": args.quick, "selected": selected,
                     "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                     "machine": machine(), "config": vars(sizes), "spark_settings": spark_settings(),
                     "notes": list(NOTES), "benchmarks": {},
                     "errors": {}}
    t0 = time.monotonic()
    with ProcessGroup(out_dir / "logs", base_env=dict(os.environ, PYTHONUNBUFFERED="1")) as procs:
        run = suites.BenchRun(settings, sizes, run_id, out_dir, procs)
        run.start_load_sampler()
        results["load_samples"] = run.load_samples
        try:
            for name in selected:
                try:
                    if name == "producer":
                        results["benchmarks"]["producer"] = suites.bench_producer(run)
                    elif name == "pipeline":
                        results["benchmarks"]["pipeline"] = suites.bench_pipeline(
                            run, args.spark_variants, baselines=() if args.no_baselines else suites.BASELINES,
                            repeats=args.spark_repeats)
                    elif name in ("python", "faust"):
                        bl = ("python_1p", "python_2p") if name == "python" else ("faust_1p",)
                        if args.quick and name == "python":
                            bl = ("python_1p",)
                        got = suites.bench_pipeline(run, only_spark=[], baselines=bl, label=name)
                        merged = results["benchmarks"].setdefault("pipeline", {})
                        for cards, res in got.items():
                            merged.setdefault(cards, {"data": res["data"], "variants": {}})["variants"].update(res["variants"])
                    elif name == "latency":
                        results["benchmarks"]["latency"] = suites.bench_latency(run, args.latency_variants)
                    elif name == "demo":
                        results["benchmarks"]["demo"] = demo_latency.bench_demo(
                            run, args.demo_rates or sizes.demo_rates, args.demo_duration or sizes.demo_duration_s,
                            tuple(args.demo_variants), args.demo_repeats)
                    elif name == "exactly-once":
                        pipe = results["benchmarks"].get("pipeline")
                        from_pipe = suites.exactly_once_from_pipeline(pipe) if pipe else None
                        results["benchmarks"]["exactly_once"] = from_pipe or suites.bench_exactly_once(run)
                    elif name == "metrics":
                        results["benchmarks"]["metrics"] = suites.bench_metrics(run)
                    elif name == "memory":
                        results["benchmarks"]["memory"] = suites.bench_memory(
                            run, results["benchmarks"].get("pipeline"))
                except Exception as error:  # one broken benchmark must not lose the others' figures
                    results["errors"][name] = "".join(traceback.format_exception(error))[-3000:]
                    run.log(f"!! {name} failed: {error}")
                _write(results, out_dir, final=False)
        finally:
            run.set_phase("cleanup")
            run.cleanup()
    results["duration_s"] = round(time.monotonic() - t0, 1)
    results["leftover_processes"] = procs.leftovers()
    paths = _write(results, out_dir, final=True)
    print(f"\n{paths['md'].read_text()}\n-> {out_dir}")
    return 1 if results["errors"] else 0


def _write(results: dict, out_dir, final: bool) -> dict:
    json_path = out_dir / "results.json"
    json_path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    md = out_dir / "results.md"
    md.write_text(report.markdown(results) + "\n")
    if final:
        results["plots"] = report.plots(results, out_dir)
        json_path.write_text(json.dumps(results, indent=1, default=str) + "\n")
    return {"json": json_path, "md": md}


if __name__ == "__main__":
    raise SystemExit(main())
