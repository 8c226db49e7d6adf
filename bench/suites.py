"""The benchmarks of ``python -m bench``: each compares its variants in the same run.

A ``BenchRun`` owns the run's folder (``artifacts/bench/<run>/``), its per-run topics (deleted at the
end) and a ``ProcessGroup`` for every child (Spark drivers, baseline consumers, Faust workers,
generators), so nothing outlives the run. Waiting is polling with deadlines, never a fixed sleep.
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from bench.workload import Workload, generate, publish_values
from common.quantiles import quantile
from common.settings import REPO_ROOT, Settings
from common.waiting import wait_until
from deploy.processes import ProcessGroup
from common.kafka_admin import TopicSpec, create_topics, delete_topics

ALL_DETECTORS = ["double_swipe", "impossible_travel", "amount_anomaly", "velocity"]   # registry order
# The built-in detectors that run on JVM-native operators only (amount_anomaly keeps per-card Python state).
NATIVE_DETECTORS = ["double_swipe", "impossible_travel", "velocity"]
DS_VEL = ["double_swipe", "velocity"]


@dataclass
class Sizes:
    count: int                         # transactions pre-loaded per card population
    cards: list[int]
    max_offsets: int
    large_batch: int                   # maxOffsetsPerTrigger of the *_large_batches variant
    spark_timeout_s: float             # cap per Spark variant (then: rate over what was read, "capped")
    slow_timeout_s: float              # cap for the all-detector variants (per-key Python state)
    baseline_timeout_s: float
    latency_loads: list[int]
    latency_window_s: float
    latency_warmup_s: float
    eo_rounds: int
    producer_count: int
    producer_rounds: int
    demo_rates: list[int] = field(default_factory=lambda: [500, 1000, 2000, 5000])
    demo_duration_s: float = 30.0
    metrics_rounds: int = 8            # on/off pairs of bench_metrics (ABBA), each run reading metrics_rows
    metrics_rows: int = 75_000

    @classmethod
    def for_mode(cls, quick: bool) -> "Sizes":
        # 25k-row batches: each micro-batch pays ~1 s of planning and state-store commits, which smaller
        # batches do not amortise; at the measured 5-15k tx/s a batch still takes 2-5 s, so every variant
        # gets several batches within its cap. One variant reads 100k per batch (two batches of the 200k):
        # what a query that has fallen behind does (make demo's queries read up to 200k per batch).
        if quick:
            return cls(count=20_000, cards=[10_000, 100_000], max_offsets=10_000, large_batch=20_000,
                       spark_timeout_s=45, slow_timeout_s=45, baseline_timeout_s=90, latency_loads=[1000, 2000],
                       latency_window_s=10, latency_warmup_s=5, eo_rounds=1, producer_count=20_000,
                       producer_rounds=1, demo_rates=[1000], demo_duration_s=20.0, metrics_rounds=2,
                       metrics_rows=20_000)
        return cls(count=200_000, cards=[10_000, 100_000, 1_000_000], max_offsets=25_000, large_batch=100_000,
                   spark_timeout_s=90, slow_timeout_s=120, baseline_timeout_s=120, latency_loads=[1000, 2000, 5000, 20000],
                   latency_window_s=20, latency_warmup_s=5, eo_rounds=1, producer_count=50_000,
                   producer_rounds=2)


@dataclass
class BenchRun:
    settings: Settings
    sizes: Sizes
    run_id: str
    out_dir: Path
    procs: ProcessGroup
    topics: list[str] = field(default_factory=list)
    datasets: dict[int, dict] = field(default_factory=dict)
    load_samples: list[dict] = field(default_factory=list)
    phase: str = "start"
    log: callable = print

    # -- topics and data -----------------------------------------------------------------------------
    def topic(self, base: str, partitions: int, **config: str) -> str:
        name = f"bench.{self.run_id}.{base}"
        if name not in create_topics(self.settings, [TopicSpec(name, partitions, dict(config))]):
            # A run interrupted before its clean-up left it: reading it would count its records twice.
            raise RuntimeError(f"topic {name} exists already (left by an earlier run with id {self.run_id!r}): "
                               f"use another --run-id or delete the topics bench.{self.run_id}.*")
        self.topics.append(name)
        return name

    def outputs(self, variant: str) -> dict:
        s = self.settings
        tag = f"{variant}.{uuid.uuid4().hex[:6]}"
        return {"alerts_topic": self.topic(f"{tag}.alerts", s.partitions_alerts),
                "dlq_topic": self.topic(f"{tag}.dlq", s.partitions_dlq),
                "markers_topic": self.topic(f"{tag}.markers", 1, **{"cleanup.policy": "compact"})}

    def dataset(self, cards: int) -> dict:
        if cards not in self.datasets:
            w = Workload(count=self.sizes.count, cards=cards)
            t0 = time.monotonic()
            keys, values, truth = generate(w)
            gen_s = time.monotonic() - t0
            topic = self.topic(f"tx.{cards}", self.settings.partitions_transactions)
            pub = publish_values(self.settings, topic, keys, values)
            self.datasets[cards] = {"topic": topic, "workload": w.describe(), "truth": truth,
                                    "generate_s": round(gen_s, 1), "publish": pub}
            self.log(f"  data: {len(values):,} transactions over {cards:,} cards -> {topic} "
                     f"({pub['rate_per_s']:,.0f} msg/s)")
        return self.datasets[cards]

    def cleanup(self) -> None:
        delete_topics(self.settings, self.topics)
        self.topics = []

    # -- load average -------------------------------------------------------------------------------
    def start_load_sampler(self, interval: float = 5.0) -> None:
        stop = threading.Event()

        def sample():
            while True:
                self.load_samples.append({"t": round(time.time(), 1), "phase": self.phase,
                                          "load_avg": [round(x, 2) for x in os.getloadavg()]})
                if stop.wait(interval):
                    return
        threading.Thread(target=sample, daemon=True).start()
        self._stop_sampler = stop

    def set_phase(self, phase: str) -> None:
        self.phase = phase
        self.log(f"[{time.strftime('%H:%M:%S')}] {phase}  (load {os.getloadavg()[0]:.2f})")

    # -- children ---------------------------------------------------------------------------------------
    def child(self, name: str, args: list[str], env: dict | None = None):
        return self.procs.start(name, args, env=env)

    def wait_exit(self, child, timeout: float, what: str) -> int:
        wait_until(lambda: child.proc.poll() is not None, timeout, what, interval=0.5)
        code = child.proc.returncode
        if code != 0:
            raise RuntimeError(f"{child.name} exited with {code}; log tail:\n{child.tail(30)}")
        return code

    def stop_child(self, name: str) -> None:
        import signal

        self.procs.kill(name, signal.SIGTERM, timeout=30)


# ===================================================================================================
# 1. producer
# ===================================================================================================

def bench_producer(run: BenchRun) -> dict:
    run.set_phase("producer: bench/producer_throughput.py")
    before = set((REPO_ROOT / "artifacts" / "bench").glob("producer-*.json"))
    child = run.child("producer", ["-m", "bench.producer_throughput", "--count", str(run.sizes.producer_count),
                                   "--rounds", str(run.sizes.producer_rounds)])
    run.wait_exit(child, 900, "the producer benchmark to finish")
    new = sorted(set((REPO_ROOT / "artifacts" / "bench").glob("producer-*.json")) - before)
    if not new:
        raise RuntimeError("bench/producer_throughput.py wrote no JSON")
    report = json.loads(new[-1].read_text())
    (run.out_dir / "producer.json").write_text(json.dumps(report, indent=2))
    report["source_file"] = str(new[-1].relative_to(REPO_ROOT))
    return report


# ===================================================================================================
# 2. pipeline throughput (Spark variants + baselines), per card population
# ===================================================================================================

SPARK_VARIANTS = {
    # name: (detectors, shared, sink)
    "spark_double_swipe": (["double_swipe"], True, "exactly-once"),
    "spark_ds_velocity": (DS_VEL, True, "exactly-once"),
    "spark_ds_velocity_builtin_sink": (DS_VEL, True, "spark-kafka"),
    "spark_ds_velocity_per_query": (DS_VEL, False, "exactly-once"),
    "spark_all_shared": (ALL_DETECTORS, True, "exactly-once"),
    "spark_all_per_query": (ALL_DETECTORS, False, "exactly-once"),
    "spark_native_shared": (NATIVE_DETECTORS, True, "exactly-once"),
    "spark_all_shared_large_batches": (ALL_DETECTORS, True, "exactly-once"),
    "spark_all_shared_default_batches": (ALL_DETECTORS, True, "exactly-once"),
    # the code-generation switch by batch size (spark_job.tuning.codegen) against either mode throughout
    "spark_all_shared_large_batches_interpreted": (ALL_DETECTORS, True, "exactly-once"),
    "spark_all_shared_large_batches_compiled": (ALL_DETECTORS, True, "exactly-once"),
}
# How a variant runs code, when not as the settings say: one mode throughout, no switch.
CODEGEN_MODES = {
    "spark_all_shared_large_batches_interpreted": {"codegen_factory_mode": "NO_CODEGEN", "codegen_large_batch_rows": 0},
    "spark_all_shared_large_batches_compiled": {"codegen_factory_mode": "FALLBACK", "codegen_large_batch_rows": 0},
}
# Detector parameters a variant changes (none at present: amount_anomaly's state_buckets, which the
# card_groups variant set, went with its Python state in 4.0.0).
VARIANT_PARAMS: dict[str, dict] = {}


# A 2 GB driver ran out of heap after several variants in one JVM (the validation expression makes very
# large plans, planned again every micro-batch); 4 GB holds a whole card population's variants.
SPARK_ENV = {"FRAUD_SPARK_DRIVER_MEMORY": "4g"}


def spark_plan_run(run: BenchRun, name: str, detectors, shared, sink, data: dict, expected: int | None = None,
                   timeout: float | None = None) -> dict:
    slow = "amount_anomaly" in detectors
    return {"name": name, "detectors": detectors, "shared": shared, "sink": sink, "with_dlq": True,
            "params": VARIANT_PARAMS.get(name, {}),
            "topic": data["topic"], **run.outputs(name.replace("#", "-")), "expected_rows": expected or data["truth"]["transactions"],
            "timeout_s": timeout or (run.sizes.slow_timeout_s if slow else run.sizes.spark_timeout_s),
            "max_offsets_per_trigger": batch_size(run.sizes, name),
            # Spark's built-in Kafka sink cannot switch how a query's batches run code by their size
            # (spark_job.tuning.codegen.CodegenByBatchSize): the exactly-once pair runs both with the fixed mode
            "codegen_large_batch_rows": 0 if name in EXACTLY_ONCE_PAIR else None,
            **CODEGEN_MODES.get(name.split("#")[0], {})}


EXACTLY_ONCE_PAIR = ("spark_ds_velocity", "spark_ds_velocity_builtin_sink")


def batch_size(sizes: Sizes, variant: str) -> int:
    """maxOffsetsPerTrigger of a variant: the same for every variant but those that measure larger batches
    (``*_default_batches``: the runner's own bound, what ``python -m detectors run`` and ``make demo`` read
    per micro-batch when they have fallen behind)."""
    if variant.endswith("_default_batches"):
        from spark_job.options import RunOptions

        return RunOptions().max_offsets_per_trigger
    return sizes.large_batch if "_large_batches" in variant else sizes.max_offsets


def run_spark_plan(run: BenchRun, label: str, plan_runs: list[dict], budget_s: float,
                   env: dict[str, str] | None = None) -> dict:
    """The runs of ``plan_runs`` in one Spark child; ``env``: its variables (default ``SPARK_ENV``)."""
    plan = run.out_dir / "tmp" / f"{label}.plan.json"
    out = run.out_dir / "tmp" / f"{label}.json"
    plan.write_text(json.dumps({"mode": "throughput", "runs": plan_runs}))
    child = run.child(label, ["-m", "bench.spark_child", str(plan), str(out)], env=SPARK_ENV if env is None else env)
    try:
        run.wait_exit(child, budget_s, f"Spark child {label}")
    except RuntimeError:
        if not out.with_suffix(".partial.json").exists():
            raise
        # keep the variants measured before the driver died (e.g. out of memory), and say so
        result = json.loads(out.with_suffix(".partial.json").read_text())
        result["failed"] = child.tail(5)
        run.log(f"    !! {label} died after {len(result['runs'])} run(s); keeping those")
        out.write_text(json.dumps(result))
    result = json.loads(out.read_text())
    for r, p in zip(result["runs"], plan_runs):
        r["alerts"] = count_alerts(run.settings, p["alerts_topic"])
        r["detectors"], r["shared"], r["sink"] = p["detectors"], p["shared"], p["sink"]
    return result


def count_alerts(settings: Settings, topic: str) -> dict:
    from common.kafka_io import read_topic

    counts: dict[str, int] = {}
    ids: set[str] = set()
    for r in read_topic(settings, topic, timeout=120):
        doc = json.loads(r.value)
        counts[doc["detector"]] = counts.get(doc["detector"], 0) + 1
        ids.add(doc["alert_id"])
    counts["distinct_alert_ids"] = len(ids)
    return counts


def run_baseline_throughput(run: BenchRun, kind: str, processes: int, data: dict) -> dict:
    """kind: "python" (kafka-python consumer, ``processes`` in one group) or "faust" (one worker)."""
    name = f"{kind}_{processes}p"
    outs = run.outputs(name)
    group = f"bench-{run.run_id}-{name}-{uuid.uuid4().hex[:6]}"
    stats_files = [run.out_dir / "tmp" / f"{group}-{i}.stats.json" for i in range(processes)]
    # child names must be unique per run: ProcessGroup.start reuses a known name's old command line
    children = [start_baseline(run, kind, f"{name}-{group[-6:]}-{i}", data["topic"], outs, group, stats_files[i])
                for i in range(processes)]
    expected = data["truth"]["transactions"]
    capped = False
    try:
        wait_until(lambda: _committed(run.settings, group, data["topic"]) >= expected or _dead(children),
                   run.sizes.baseline_timeout_s, f"{name} to commit {expected} offsets", interval=0.5)
        if _dead(children):
            raise RuntimeError(f"{name} died: {_dead(children).tail(30)}")
        # the last stats write lands within its 0.5 s interval
        wait_until(lambda: sum(_read(f).get("records", 0) for f in stats_files) >= expected, 10,
                   f"{name} stats", interval=0.2)
    except TimeoutError:
        capped = True
    finally:
        for c in children:
            run.stop_child(c.name)
    stats = [_read(f) for f in stats_files]
    diagnosis = {"log_tails": [c.tail(15) for c in children], "stats": stats,
                 "committed": _committed(run.settings, group, data["topic"])} if capped else {}
    firsts = [s["first_wall"] for s in stats if s.get("first_wall")]
    lasts = [s["last_wall"] for s in stats if s.get("last_wall")]
    records = sum(s.get("records", 0) for s in stats)
    span = (max(lasts) - min(firsts)) if firsts else 0
    rows = min(records, expected)
    return {"name": name, "processes": processes, "rows": rows, "records_incl_redelivered": records,
            "span_s": round(span, 3), "tx_per_second": round(rows / span, 1) if span else None, "capped": capped,
            "rss_bytes": sum(s.get("rss_bytes", 0) for s in stats),
            "late_dropped": sum(s.get("late_dropped", 0) for s in stats),
            "alerts": count_alerts(run.settings, outs["alerts_topic"]), "load_avg": os.getloadavg(), **diagnosis}


def start_baseline(run: BenchRun, kind: str, name: str, topic: str, outs: dict, group: str, stats: Path):
    if kind == "python":
        return run.child(name, ["-m", "bench.baselines.kafka_consumer", "--topic", topic, "--alerts-topic",
                                outs["alerts_topic"], "--dlq-topic", outs["dlq_topic"], "--group", group,
                                "--stats", str(stats)])
    env = {"FRAUD_TOPIC_TRANSACTIONS": topic, "FRAUD_TOPIC_ALERTS": outs["alerts_topic"],
           "FRAUD_TOPIC_DLQ": outs["dlq_topic"], "BENCH_FAUST_APP_ID": group, "BENCH_STATS": str(stats),
           "FRAUD_RUN_DIR": str(run.out_dir / "tmp" / "faust-run")}
    return run.child(name, ["-m", "bench.baselines.faust_agent", "worker", "-l", "warn"], env=env)


def _dead(children):
    return next((c for c in children if not c.running()), None)


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _committed(settings: Settings, group: str, topic: str) -> int:
    from common.kafka_admin import admin_client

    with admin_client(settings) as admin:
        try:
            offsets = admin.list_group_offsets(group).get(group) or {}
        except Exception:  # the group does not exist yet
            return 0
    return sum(o.offset for tp, o in offsets.items() if tp.topic == topic and o.offset > 0)


BASELINES = ("python_1p", "python_2p", "faust_1p")


def bench_pipeline(run: BenchRun, only_spark: list[str] | None = None, baselines=BASELINES,
                   label: str = "pipeline", repeats: int = 1) -> dict:
    """Throughput per card population; with ``repeats`` > 1 each Spark variant runs that many times in one
    JVM, the order reversed every round, named ``<variant>#<k>``."""
    variants = {k: v for k, v in SPARK_VARIANTS.items() if only_spark is None or k in only_spark}
    results: dict[str, dict] = {}
    for cards in run.sizes.cards:
        run.set_phase(f"{label}: data for {cards:,} cards")
        data = run.dataset(cards)
        by_cards: dict[str, dict] = {}
        if variants:
            run.set_phase(f"{label}: Spark variants at {cards:,} cards ({', '.join(variants)})")
            names = list(variants)
            if run.sizes.cards.index(cards) % 2 == 1 and all(n in names for n in EXACTLY_ONCE_PAIR):
                # alternate which sink goes first (exactly-once pairs)
                i, j = (names.index(n) for n in EXACTLY_ONCE_PAIR)
                names[i], names[j] = names[j], names[i]
            # the JVM's first query pays code generation and JIT warm-up: a 2k-row batch, not measured
            warm = spark_plan_run(run, "warmup", DS_VEL, True, "exactly-once", data, expected=1000, timeout=150)
            warm["max_offsets_per_trigger"] = 1000
            if repeats > 1:
                from bench.demo_latency import run_order

                names = [f"{name}#{k}" for name, k in run_order(tuple(names), repeats)]
            plan = [warm] + [spark_plan_run(run, name, *variants[name.split("#")[0]], data) for name in names]
            budget = 240 + sum(p["timeout_s"] + 30 for p in plan)
            spark = run_spark_plan(run, f"{label}-spark-{cards}", plan, budget)
            for r in spark["runs"][1:]:
                r["session_start_s"] = spark["session_start_s"]
                by_cards[r["name"]] = r
                run.log(f"    {r['name']:<32} {r['tx_per_second'] or 0:>10,.0f} tx/s  rows {r['rows']:,}"
                        f"{' (capped)' if r['capped'] else ''}  alerts {r['alerts']}")
        for b in baselines:
            kind, procs = b.split("_")[0], int(b.split("_")[1][0])
            run.set_phase(f"{label}: baseline {b} at {cards:,} cards")
            r = run_baseline_throughput(run, kind, procs, data)
            by_cards[r["name"]] = r
            run.log(f"    {r['name']:<32} {r['tx_per_second'] or 0:>10,.0f} tx/s  rows {r['rows']:,}"
                    f"{' (capped)' if r['capped'] else ''}  alerts {r['alerts']}")
        results[str(cards)] = {"data": data, "variants": by_cards}
    return results


# ===================================================================================================
# 3. latency at fixed loads
# ===================================================================================================

LATENCY_VARIANTS = ("spark_ds_velocity", "spark_ds_velocity_per_query", "python_1p", "faust_1p")


class AlertCollector(threading.Thread):
    """Reads an alerts topic (read_committed) and keeps (receive wall time, alert) of double_swipe alerts."""

    def __init__(self, settings: Settings, topic: str):
        super().__init__(daemon=True)
        self.settings, self.topic = settings, topic
        self.got: list[tuple[float, float, float | None]] = []   # (event_time, received, detected_at)
        self._stop = threading.Event()
        self.ready = threading.Event()

    def run(self):
        from kafka import TopicPartition

        from common.contracts import parse_event_time
        from common.kafka_io import make_consumer

        consumer = make_consumer(self.settings, group_id=None)
        tps = [TopicPartition(self.topic, p) for p in sorted(consumer.partitions_for_topic(self.topic))]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        self.ready.set()
        try:
            while not self._stop.is_set():
                for records in consumer.poll(timeout_ms=50).values():
                    now = time.time()
                    for r in records:
                        doc = json.loads(r.value)
                        if doc.get("detector") != "double_swipe":
                            continue
                        ev = parse_event_time(doc["event_time"]).timestamp()
                        det = parse_event_time(doc["detected_at"]).timestamp() if doc.get("detected_at") else None
                        self.got.append((ev, now, det))
        finally:
            consumer.close()

    def stop(self):
        self._stop.set()


def bench_latency(run: BenchRun, variants=LATENCY_VARIANTS) -> dict:
    sizes = run.sizes
    results: dict[str, dict] = {}
    for variant in variants:
        run.set_phase(f"latency: {variant}")
        topic = run.topic(f"live.{variant}", run.settings.partitions_transactions)
        outs = run.outputs(f"live-{variant}")
        name = f"latency-{variant}"
        if variant.startswith("spark"):
            detectors, shared, sink = SPARK_VARIANTS[variant]
            plan = run.out_dir / "tmp" / f"{name}.plan.json"
            out = run.out_dir / "tmp" / f"{name}.json"
            plan.write_text(json.dumps({"mode": "live", "runs": [
                {"name": variant, "detectors": detectors, "shared": shared, "sink": sink, "with_dlq": True,
                 "topic": topic, **outs}]}))
            children = [run.child(name, ["-m", "bench.spark_child", str(plan), str(out)], env=SPARK_ENV)]
            ready = lambda: Path(str(out) + ".ready").exists() or _dead(children)  # noqa: E731
        else:
            kind, procs = variant.split("_")[0], int(variant.split("_")[1][0])
            group = f"bench-{run.run_id}-{name}"
            stats = [run.out_dir / "tmp" / f"{name}-{i}.stats.json" for i in range(procs)]
            children = [start_baseline(run, kind, f"{name}-{i}", topic, outs, group, stats[i]) for i in range(procs)]
            ready = lambda: all(_read(f).get("assigned") for f in stats) or _dead(children)  # noqa: E731
        per_load: dict[str, dict] = {}
        collector = AlertCollector(run.settings, outs["alerts_topic"])
        try:
            wait_until(ready, 180, f"{variant} to be ready", interval=0.5)
            if _dead(children):
                raise RuntimeError(f"{variant} died: {_dead(children).tail(30)}")
            collector.start()
            collector.ready.wait(30)
            if variant.startswith("spark"):
                # prime: the first batches with data pay code generation and JIT (tens of seconds here);
                # 10 s at 200 tx/s, then wait for its alerts, not measured
                run.set_phase(f"latency: {variant} priming (200 tx/s for 10 s, not measured)")
                prime_out = run.out_dir / "tmp" / f"{name}-prime.json"
                prime = run.child(f"{name}-prime", ["-m", "bench.workload", "live", "--topic", topic, "--rate", "200",
                                                    "--duration", "10", "--run-id", "prime", "--seed", "99",
                                                    "--out", str(prime_out)])
                run.wait_exit(prime, 130, "the priming generator")
                primed = json.loads(prime_out.read_text())["double_swipes"]
                try:
                    wait_until(lambda: len(collector.got) >= primed or _dead(children), 180, "priming alerts",
                               interval=0.5)
                except TimeoutError:
                    run.log("    priming alerts did not all arrive in 180 s; measuring anyway")
            for rate in sizes.latency_loads:
                run.set_phase(f"latency: {variant} at {rate:,} tx/s")
                gen_out = run.out_dir / "tmp" / f"{name}-gen-{rate}.json"
                duration = sizes.latency_warmup_s + sizes.latency_window_s
                t_start = time.time()
                gen = run.child(f"{name}-gen-{rate}", ["-m", "bench.workload", "live", "--topic", topic,
                                                       "--rate", str(rate), "--duration", str(duration),
                                                       "--run-id", f"{rate}", "--seed", str(1000 + rate),
                                                       "--out", str(gen_out)])
                run.wait_exit(gen, duration + 120, f"the generator at {rate} tx/s")
                t_end = time.time()
                summary = json.loads(gen_out.read_text())
                window = (t_start + sizes.latency_warmup_s, t_end)
                in_load = lambda: [g for g in collector.got if t_start <= g[0] <= t_end + 5]  # noqa: E731
                try:
                    wait_until(lambda: len(in_load()) >= summary["double_swipes"] or _dead(children), 30,
                               f"alerts of the {rate} tx/s load", interval=0.25)
                    drained = True
                except TimeoutError:
                    drained = False
                got = [g for g in in_load() if window[0] <= g[0] <= window[1]]
                lat = [g[1] - g[0] for g in got]
                det = [g[2] - g[0] for g in got if g[2] is not None]
                per_load[str(rate)] = {
                    "target_rate": rate, "achieved_rate": summary["achieved_rate"], "generator": summary,
                    "window_s": round(window[1] - window[0], 1), "alerts_in_window": len(got),
                    "alerts_in_load": len(in_load()), "double_swipes_injected": summary["double_swipes"],
                    "drained": drained,
                    "receive_p50_s": quantile(lat, 0.50), "receive_p99_s": quantile(lat, 0.99), "receive_max_s": quantile(lat, 1.0),
                    "detected_p50_s": quantile(det, 0.50), "detected_p99_s": quantile(det, 0.99),
                    "load_avg": os.getloadavg(), "samples": [round(x, 3) for x in lat[:2000]]}
                run.log(f"    {variant:<22} {rate:>6,}/s (achieved {summary['achieved_rate']:,.0f}): "
                        f"p50 {per_load[str(rate)]['receive_p50_s']} s, p99 {per_load[str(rate)]['receive_p99_s']} s, "
                        f"{len(got)} alerts in window{'' if drained else ' (NOT drained: saturated)'}")
                if not drained:
                    break   # it cannot keep up: higher loads would only measure its backlog
        finally:
            collector.stop()
            if variant.startswith("spark"):
                stop_file = Path(str(run.out_dir / "tmp" / f"{name}.json") + ".stop")
                stop_file.write_text("1")
                try:
                    wait_until(lambda: children[0].proc.poll() is not None, 60, f"{name} to stop", interval=0.5)
                except TimeoutError:
                    pass
            for c in children:
                if c.running():
                    run.stop_child(c.name)
        results[variant] = per_load
    return results


# ===================================================================================================
# 4. exactly-once overhead
# ===================================================================================================

def exactly_once_from_pipeline(pipeline: dict) -> dict | None:
    """The pipeline's double_swipe + velocity query with each sink, back to back in one JVM at every card
    population (the order alternates between populations): the exactly-once overhead, in the same run."""
    pairs = []
    for cards, res in pipeline.items():
        v = res["variants"]
        eo, bi = v.get("spark_ds_velocity"), v.get("spark_ds_velocity_builtin_sink")
        if eo and bi and eo.get("tx_per_second") and bi.get("tx_per_second"):
            pairs.append({"cards": int(cards), "exactly_once": eo["tx_per_second"], "builtin": bi["tx_per_second"],
                          "exactly_once_steady": eo.get("steady_tx_per_second"),
                          "builtin_steady": bi.get("steady_tx_per_second"),
                          "slowdown_pct": round(100 * (1 - eo["tx_per_second"] / bi["tx_per_second"]), 1),
                          "add_batch_ms_per_batch": {
                              name: round(sum(q["duration_ms_sum"].get("addBatch", 0) for q in x["queries"].values())
                                          / max(1, sum(q["batches"] for q in x["queries"].values())), 1)
                              for name, x in (("exactly_once", eo), ("builtin", bi))}})
    if not pairs:
        return None
    eo = [p["exactly_once"] for p in pairs]
    bi = [p["builtin"] for p in pairs]
    ratios = sorted(p["exactly_once"] / p["builtin"] for p in pairs)
    return {"source": "pipeline: spark_ds_velocity vs spark_ds_velocity_builtin_sink", "pairs": pairs,
            "exactly_once_tx_per_s": eo, "builtin_tx_per_s": bi,
            "exactly_once_median": statistics.median(eo), "builtin_median": statistics.median(bi),
            "slowdown_pct": round(100 * (1 - statistics.median(ratios)), 1)}


def bench_exactly_once(run: BenchRun) -> dict:
    cards = 100_000 if 100_000 in run.sizes.cards else run.sizes.cards[-1]
    run.set_phase(f"exactly-once: data for {cards:,} cards")
    data = run.dataset(cards)
    run.set_phase(f"exactly-once: double_swipe (shared query with DLQ branch) exactly-once vs built-in sink, "
                  f"{run.sizes.eo_rounds} round(s), interleaved")
    warm = spark_plan_run(run, "warmup", ["double_swipe"], True, "exactly-once", data, expected=2000, timeout=150)
    warm["max_offsets_per_trigger"] = 2000
    plan = [warm]
    for i in range(run.sizes.eo_rounds):
        plan.append(spark_plan_run(run, f"eo_round{i}", ["double_swipe"], True, "exactly-once", data))
        plan.append(spark_plan_run(run, f"builtin_round{i}", ["double_swipe"], True, "spark-kafka", data))
    result = run_spark_plan(run, "exactly-once", plan, 240 + sum(p["timeout_s"] + 30 for p in plan))
    runs = result["runs"][1:]
    eo = [r["tx_per_second"] for r in runs if r["name"].startswith("eo_") and r["tx_per_second"]]
    bi = [r["tx_per_second"] for r in runs if r["name"].startswith("builtin_") and r["tx_per_second"]]
    out = {"cards": cards, "runs": runs, "exactly_once_tx_per_s": eo, "builtin_tx_per_s": bi}
    if eo and bi:
        out["exactly_once_median"], out["builtin_median"] = statistics.median(eo), statistics.median(bi)
        out["slowdown_pct"] = round(100 * (1 - out["exactly_once_median"] / out["builtin_median"]), 1)
        # the mean time per batch spent in the sink (addBatch) tells the writer's own cost apart from noise
        out["add_batch_ms_per_batch"] = {r["name"]: round(sum(q["duration_ms_sum"].get("addBatch", 0)
                                                                 for q in r["queries"].values())
                                                             / max(1, sum(q["batches"] for q in r["queries"].values())), 1)
                                         for r in runs}
    for r in runs:
        run.log(f"    {r['name']:<16} {r['tx_per_second'] or 0:>10,.0f} tx/s  alerts {r['alerts']}")
    run.log(f"    slowdown of exactly-once vs built-in: {out.get('slowdown_pct')} %")
    return out


def bench_metrics(run: BenchRun, rounds: int | None = None, rows: int | None = None) -> dict:
    """The detector job with its Prometheus metrics on and off (FRAUD_METRICS_ENABLED), double_swipe +
    velocity with the exactly-once writer, in one JVM: ``rounds`` short pairs of runs in ABBA order
    (on/off, off/on, ...), each reading the first ``rows`` transactions. The metrics' cost (target: under
    2%) three ways, each figure paired within a round (its two runs are back to back, so they share the
    machine's load): CPU seconds of the job's process tree per 1,000 transactions, throughput, and the
    time spent inside metrics code (bench.timed_metrics) over the run's CPU."""
    from bench.paired import per_thousand

    rounds = rounds or run.sizes.metrics_rounds
    cards = run.sizes.cards[0]
    run.set_phase(f"metrics: data for {cards:,} cards")
    data = run.dataset(cards)
    rows = min(rows or run.sizes.metrics_rows, data["truth"]["transactions"])
    run.set_phase(f"metrics: double_swipe + velocity with metrics on and off, {rounds} round(s) of "
                  f"{rows:,} transactions, ABBA")
    # The JVM's first queries run cold (code generation, JIT): two whole unmeasured runs of the same query
    # (after one, the first rounds still spent 40% more CPU than the last). No cap that a loaded machine
    # would reach: a capped run's fixed costs spread over fewer rows.
    timeout = 4 * run.sizes.spark_timeout_s
    plan = [spark_plan_run(run, f"warmup{w}", DS_VEL, True, "exactly-once", data, expected=rows, timeout=timeout)
            for w in range(2)]
    for i in range(rounds):
        pair = [("on", True), ("off", False)]
        for state, on in (pair if i % 2 == 0 else pair[::-1]):
            plan.append({**spark_plan_run(run, f"metrics_{state}_round{i}", DS_VEL, True, "exactly-once", data,
                                          expected=rows, timeout=timeout), "metrics": on})
    result = run_spark_plan(run, "metrics", plan, 240 + sum(p["timeout_s"] + 30 for p in plan))
    runs = result["runs"][2:]
    out = {"cards": cards, "rows_per_run": rows, "rounds": rounds, "runs": runs, **metrics_cost(runs)}
    for r in runs:
        run.log(f"    {r['name']:<20} {r['tx_per_second'] or 0:>10,.0f} tx/s  "
                f"{per_thousand(r.get('cpu_s', 0), r['rows']) or 0:.3f} CPU s/1000 tx  alerts {r['alerts']}"
                f"{'  scrapes ' + str(r['metrics_scrapes']) if 'metrics_scrapes' in r else ''}")
    for what in ("cpu_cost", "driver_cpu_cost", "throughput_cost"):
        c = out[what]
        if c.get("pairs"):
            run.log(f"    {what}: median {c['median_pct']} % over {c['pairs']} pairs (min {c['min_pct']}, "
                    f"max {c['max_pct']}, bootstrap 95% {c['ci95_pct']})")
    run.log(f"    inside metrics code: {out['metrics_code']['share_of_cpu_pct']} % of the on-runs' CPU "
            f"({out['metrics_code']['us_per_transaction']} µs per transaction)")
    return out


def metrics_cost(runs: list[dict]) -> dict:
    """The figures of ``bench_metrics`` from its runs (``metrics_<on|off>_round<i>``): each round's on-run
    paired with its off-run; a round without both, or with a capped run (stopped before it read its
    rows), is left out and counted in ``rounds_left_out``."""
    from bench.paired import paired_cost, paired_share, per_thousand

    by_round: dict[int, dict] = {}
    for r in runs:
        state, _, index = r["name"][len("metrics_"):].partition("_round")
        by_round.setdefault(int(index), {})[state] = r
    pairs = [p for _, p in sorted(by_round.items())
             if "on" in p and "off" in p and not (p["on"].get("capped") or p["off"].get("capped"))]
    on, off = [p["on"] for p in pairs], [p["off"] for p in pairs]
    cpu_on, cpu_off = ([per_thousand(r.get("cpu_s", 0), r["rows"]) for r in side] for side in (on, off))
    tx_on, tx_off = [r["tx_per_second"] for r in on], [r["tx_per_second"] for r in off]
    out = {"metrics_on_tx_per_s": tx_on, "metrics_off_tx_per_s": tx_off,
           "cpu_s_per_1000_on": [c and round(c, 4) for c in cpu_on],
           "cpu_s_per_1000_off": [c and round(c, 4) for c in cpu_off],
           "cpu_cost": paired_cost(cpu_on, cpu_off, lower_is_better=True),
           "throughput_cost": paired_cost(tx_on, tx_off, lower_is_better=False),
           # the driver's extra CPU per transaction with the metrics on, in percent of the whole job's
           "driver_cpu_cost": paired_share([per_thousand(r.get("driver_cpu_s"), r["rows"]) for r in on],
                                           [per_thousand(r.get("driver_cpu_s"), r["rows"]) for r in off],
                                           cpu_off),
           "rounds_left_out": len(by_round) - len(pairs)}
    code = {part: sum(r.get("metrics_code_s", {}).get(part, 0.0) for r in on)
            for part in ("progress", "writer_rows", "writer_commit", "scrape")}
    on_cpu, on_rows = sum(r.get("cpu_s", 0) for r in on), sum(r["rows"] for r in on)
    out["metrics_code"] = {"seconds": {k: round(v, 4) for k, v in code.items()},
                           "share_of_cpu_pct": round(100 * sum(code.values()) / on_cpu, 3) if on_cpu else None,
                           "us_per_transaction": round(1e6 * sum(code.values()) / on_rows, 3) if on_rows else None,
                           "scrapes": sum(r.get("metrics_scrapes", 0) for r in on)}
    if out["throughput_cost"].get("pairs"):
        out["cost_pct"] = out["throughput_cost"]["median_pct"]
    return out


# ===================================================================================================
# 5. memory vs distinct cards
# ===================================================================================================

def bench_memory(run: BenchRun, pipeline: dict | None) -> dict:
    if pipeline is None:
        pipeline = bench_pipeline(run, only_spark=["spark_all_shared"], baselines=("python_1p",), label="memory")
    out: dict[str, dict] = {}
    for cards, res in pipeline.items():
        row: dict[str, dict] = {}
        for name, v in res["variants"].items():
            if name.startswith("spark"):
                peak = v.get("rss_peak_bytes", {})
                row[name] = {"jvm_bytes": peak.get("jvm", 0), "python_workers_bytes": peak.get("python_workers", 0),
                             "driver_bytes": peak.get("driver", 0), "total_bytes": peak.get("total", 0),
                             "state_rows_max": sum(q.get("state_rows_max", 0) for q in v["queries"].values()),
                             "state_memory_bytes_max": sum(q.get("state_memory_bytes_max", 0)
                                                           for q in v["queries"].values())}
            else:
                row[name] = {"total_bytes": v.get("rss_bytes", 0)}
        out[cards] = row
    return out
