"""The Spark side of the benchmark, run as a child process (its own JVM, so memory is per run and JVM
start-up is outside every measurement).

    python -m bench.spark_child PLAN.json OUT.json

``PLAN.json``: ``{"mode": "throughput" | "live", "runs": [{"name", "detectors", "shared", "sink",
"with_dlq", "topic", "alerts_topic", "dlq_topic", "markers_topic", "expected_rows", "timeout_s",
"max_offsets_per_trigger", "params": {detector: {parameter: value}}}]}``.

throughput: the runs, one after the other in this JVM, each with a fresh checkpoint, reading its topic
from the earliest offset until every query has read ``expected_rows`` (or ``timeout_s`` passed: then the
figure is the rate over what was read, marked ``capped``). Throughput = rows / (end of the last batch -
start of the first batch with data) from each query's progress, so JVM start and query planning before
the first batch are excluded. While a run lasts, the RSS of this process tree is sampled (driver Python,
the JVM, the Python workers).

live: one run with ``startingOffsets`` earliest on a fresh topic and no ``maxOffsetsPerTrigger``; writes
``OUT.json.ready`` once the first batch ran, then runs until ``OUT.json.stop`` appears.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from bench.procs import tree_rss
from deploy.processes import group_cpu_seconds


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Collector:
    """Every progress event of every query, as JSON dicts (the listener runs on a py4j thread)."""

    def __init__(self):
        from common.progress_events import JsonProgressListener

        self.lock = threading.Lock()
        self.events: list[dict] = []
        self.listener = JsonProgressListener(self._record)
        self.metrics = None                 # a run's SparkMetrics while it measures with metrics on

    def _record(self, progress: dict) -> None:
        from spark_job.progress import summarize_progress

        # the job's progress listener summarizes every progress, metrics on or off; with them on, the
        # summary also goes to the metrics
        summary = summarize_progress(progress)
        if self.metrics is not None:
            self.metrics.record(progress, summary)
        with self.lock:
            self.events.append(progress)

    def of(self, names: set[str]) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e.get("name") in names]

    def rows(self, name: str) -> int:
        with self.lock:
            return sum(batch_rows(e) for e in self.events if e.get("name") == name)


class RssSampler(threading.Thread):
    def __init__(self, interval: float = 0.5):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self._stop = threading.Event()

    def reset(self):
        self.peak, self.last = {}, {}

    def run(self):
        while not self._stop.wait(self.interval):
            sample = tree_rss(os.getpid())
            self.last = sample
            for k, v in sample.items():
                self.peak[k] = max(self.peak.get(k, 0), v)

    def stop(self):
        self._stop.set()


def batch_rows(progress: dict) -> int:
    """Kafka records read by one micro-batch: end - start offsets of its source, summed over partitions.

    ``numInputRows`` is not used: Spark counts the rows of every scan of the source in the executed plan,
    so a self-join plus a union reads as 3-4x the records actually consumed."""
    total = 0
    for source in progress.get("sources") or []:
        end = _offsets(source.get("endOffset"))
        start = _offsets(source.get("startOffset"))
        for topic, parts in end.items():
            for p, off in parts.items():
                total += int(off) - int((start.get(topic) or {}).get(p, 0))
    return total


def _offsets(value) -> dict:
    if value is None:
        return {}
    return json.loads(value) if isinstance(value, str) else value


def summarize(events: list[dict], names: list[str], expected: int) -> dict:
    per_query = {}
    starts, ends = [], []
    for name in names:
        evs = [e for e in events if e.get("name") == name]
        for e in evs:
            e["_rows"] = batch_rows(e)
        data = [e for e in evs if e["_rows"] > 0]
        rows = sum(e["_rows"] for e in data)
        durations: dict[str, int] = {}
        for e in data:
            for k, v in (e.get("durationMs") or {}).items():
                durations[k] = durations.get(k, 0) + int(v)
        q = {"rows": rows, "batches": len(data), "duration_ms_sum": durations,
             "state_rows_max": max((sum(op.get("numRowsTotal", 0) for op in e.get("stateOperators") or [])
                                    for e in evs), default=0),
             "state_memory_bytes_max": max((sum(op.get("memoryUsedBytes", 0) for op in e.get("stateOperators") or [])
                                            for e in evs), default=0),
             "rows_dropped_by_watermark": sum(sum(op.get("numRowsDroppedByWatermark", 0)
                                                  for op in e.get("stateOperators") or []) for e in evs),
             "processed_rows_per_second_mean": round(sum(e.get("processedRowsPerSecond") or 0 for e in data)
                                                     / max(1, len(data)), 1),
             "batch_ms": [int((e.get("durationMs") or {}).get("triggerExecution", 0)) for e in data]}
        if data:
            first = min(_ts(e["timestamp"]) for e in data)
            last = max(_ts(e["timestamp"]) + (e.get("durationMs") or {}).get("triggerExecution", 0) / 1000
                       for e in data)
            q["span_s"] = round(last - first, 3)
            q["rows_per_second"] = round(rows / (last - first), 1) if last > first else None
            first_end = min(_ts(e["timestamp"]) + (e.get("durationMs") or {}).get("triggerExecution", 0) / 1000
                            for e in data)
            q["first_batch_end"] = first_end
            q["rows_after_first_batch"] = rows - min(data, key=lambda e: _ts(e["timestamp"]))["_rows"]
            q["num_input_rows_reported"] = sum(e.get("numInputRows", 0) for e in data)
            starts.append(first)
            ends.append(last)
        per_query[name] = q
    rows_all = min((q["rows"] for q in per_query.values()), default=0)
    span = (max(ends) - min(starts)) if starts else 0.0
    # "steady": without each query's first batch (code generation, state store creation, cold caches)
    after = [q for q in per_query.values() if q.get("rows_after_first_batch")]
    steady = None
    if starts and len(after) == len(per_query):
        t0 = max(q["first_batch_end"] for q in after)
        steady_rows = min(q["rows_after_first_batch"] for q in after)
        steady = round(steady_rows / (max(ends) - t0), 1) if max(ends) > t0 else None
    return {"queries": per_query, "rows": rows_all, "span_s": round(span, 3),
            "tx_per_second": round(rows_all / span, 1) if span > 0 else None,
            "steady_tx_per_second": steady, "complete": rows_all >= expected}


def _detectors(run: dict) -> list:
    """The run's detectors, with the parameters the variant changes."""
    from detectors import registry

    changes = run.get("params", {})
    return [registry.get(n).with_params(**changes.get(n, {})) for n in run["detectors"]]


def _keep_progress(path: Path, events: list[dict]) -> None:
    """Every progress event as Spark reported it, for a closer look at a run (durationMs, state operators)."""
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


class JobMetrics:
    """The detector job's metrics as ``python -m detectors run`` has them (FRAUD_METRICS_ENABLED): fed by
    the progress events and the exactly-once writer's hook, served on a port and scraped every
    ``every_s`` as Prometheus would (deploy/monitoring/prometheus.yml: 5 s); ``stop()`` takes them off
    again. Every piece of their code is timed (bench.timed_metrics); a scrape's time includes the
    client's side, which Prometheus would pay in a process of its own."""

    def __init__(self, collector: Collector, every_s: float = 5.0):
        import socket
        import urllib.request

        from bench.timed_metrics import TimedRegistry, TimedSparkMetrics
        from common.metrics_http import serve_metrics
        from spark_job.alert_writer import ExactlyOnceWriter

        self.collector, self.metrics = collector, TimedSparkMetrics()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.server = serve_metrics(TimedRegistry(self.metrics.registry, self.metrics), "127.0.0.1", port, "bench")
        ExactlyOnceWriter.observer = self.metrics
        collector.metrics = self.metrics
        self.scrapes = 0
        self.stopping = threading.Event()

        def scrape():
            while not self.stopping.wait(every_s):
                started = time.thread_time()
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    response.read()
                self.metrics.add("scrape", time.thread_time() - started)
                self.scrapes += 1
        self.scraper = threading.Thread(target=scrape, daemon=True)
        self.scraper.start()

    def stop(self) -> None:
        from spark_job.alert_writer import ExactlyOnceWriter

        self.stopping.set()
        self.scraper.join(timeout=10)
        ExactlyOnceWriter.observer = None
        self.collector.metrics = None
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def run_throughput(spark, collector, sampler, run: dict, settings, tmp: Path) -> dict:
    from common.waiting import wait_until
    from spark_job.queries import RunOptions, start_detectors

    s = settings.replace(topic_transactions=run["topic"], topic_alerts=run["alerts_topic"],
                         topic_dlq=run["dlq_topic"], topic_alert_markers=run["markers_topic"])
    if run.get("codegen_large_batch_rows") is not None:
        s = s.replace(spark_codegen_large_batch_rows=run["codegen_large_batch_rows"])
    mode_before = spark.conf.get("spark.sql.codegen.factoryMode")
    if run.get("codegen_factory_mode"):        # each query's session is cloned from this one at its start
        s = s.replace(spark_codegen_factory_mode=run["codegen_factory_mode"])
        spark.conf.set("spark.sql.codegen.factoryMode", run["codegen_factory_mode"])
    detectors = _detectors(run)
    options = RunOptions(sink=run["sink"], shared=run["shared"], with_dlq=run.get("with_dlq", True),
                         max_offsets_per_trigger=run.get("max_offsets_per_trigger"),
                         checkpoint_root=tmp / f"ckpt-{run['name']}-{time.monotonic_ns()}")
    sampler.reset()
    # CPU of this process tree (the driver's Python, the JVM, the Python workers), from before the
    # queries start until they and the metrics have stopped: what a variant costs, which the machine's
    # load does not inflate the way it does wall time
    cpu_before = group_cpu_seconds(os.getpgid(0))
    # and of this Python process alone, where all the metrics' code runs (listener, writer, HTTP server,
    # scraper): far less of it, and without the JVM's JIT and collector, whose noise hides 1% of the tree
    driver_before = time.process_time()
    metrics = JobMetrics(collector) if run.get("metrics") else None
    started = time.monotonic()
    queries = start_detectors(spark, detectors, s, options)
    names = [q.name for q in queries]
    expected = run["expected_rows"]
    capped = False
    try:
        def done():
            failed = [q for q in queries if not q.isActive]
            if failed:
                raise RuntimeError(f"query {failed[0].name} stopped: {failed[0].exception()}")
            return all(collector.rows(n) >= expected for n in names)
        wait_until(done, run["timeout_s"], f"{run['name']} to read {expected} rows", interval=0.25)
    except TimeoutError:
        capped = True
    finally:
        for q in queries:
            q.stop()
        if metrics is not None:
            metrics.stop()
        spark.conf.set("spark.sql.codegen.factoryMode", mode_before)
    cpu_s = group_cpu_seconds(os.getpgid(0)) - cpu_before
    driver_cpu_s = time.process_time() - driver_before
    events = collector.of(set(names))
    _keep_progress(tmp / f"{run['name']}.progress.jsonl", events)
    result = summarize(events, names, expected)
    result["cpu_s"], result["driver_cpu_s"] = round(cpu_s, 3), round(driver_cpu_s, 3)
    if metrics is not None:
        result["metrics_scrapes"] = metrics.scrapes
        result["metrics_code_s"] = {part: round(s, 6) for part, s in metrics.metrics.seconds.items()}
    result.update({"name": run["name"], "capped": capped, "wall_s_with_startup": round(time.monotonic() - started, 1),
                   "rss_peak_bytes": dict(sampler.peak), "rss_last_bytes": dict(sampler.last),
                   "load_avg": os.getloadavg()})
    with collector.lock:  # free memory of finished runs
        collector.events = [e for e in collector.events if e.get("name") not in set(names)]
    return result


def run_live(spark, collector, run: dict, settings, tmp: Path, out: Path) -> dict:
    from spark_job.queries import RunOptions, start_detectors

    s = settings.replace(topic_transactions=run["topic"], topic_alerts=run["alerts_topic"],
                         topic_dlq=run["dlq_topic"], topic_alert_markers=run["markers_topic"])
    detectors = _detectors(run)
    options = RunOptions(sink=run["sink"], shared=run["shared"], with_dlq=run.get("with_dlq", True),
                         max_offsets_per_trigger=None, checkpoint_root=tmp / f"ckpt-live-{run['name']}")
    queries = start_detectors(spark, detectors, s, options)
    ready, stop = Path(str(out) + ".ready"), Path(str(out) + ".stop")
    deadline = time.monotonic() + 120
    while not stop.exists():
        waiting = all("Waiting for data" in (q.status or {}).get("message", "") for q in queries)
        if not ready.exists() and (waiting or collector.of({q.name for q in queries}) or time.monotonic() > deadline):
            ready.write_text("1")
        bad = [q for q in queries if not q.isActive]
        if bad:
            raise RuntimeError(f"query {bad[0].name} stopped: {bad[0].exception()}")
        spark.streams.awaitAnyTermination(timeout=0.2)  # poll the stop file at 5 Hz
    for q in queries:
        q.stop()
    events = collector.of({q.name for q in queries})
    _keep_progress(tmp / f"{run['name']}.live.progress.jsonl", events)
    return {"name": run["name"], "batches": [
        {"t": _ts(e["timestamp"]), "rows": e.get("numInputRows", 0),
         "ms": (e.get("durationMs") or {}).get("triggerExecution")} for e in events]}


def main(argv: list[str]) -> int:
    from common.settings import get_settings
    from common.spark import get_spark

    plan = json.loads(Path(argv[0]).read_text())
    out = Path(argv[1])
    tmp = out.parent / (out.stem + "-spark")
    tmp.mkdir(parents=True, exist_ok=True)
    settings = get_settings()
    t0 = time.monotonic()
    spark = get_spark("bench", settings, extra={"spark.sql.streaming.numRecentProgressUpdates": "1000"})
    startup = time.monotonic() - t0
    collector = Collector()
    spark.streams.addListener(collector.listener)
    sampler = RssSampler()
    sampler.start()
    results = []
    try:
        if plan["mode"] == "live":
            results.append(run_live(spark, collector, plan["runs"][0], settings, tmp, out))
        else:
            for run in plan["runs"]:
                results.append(run_throughput(spark, collector, sampler, run, settings, tmp))
                print(json.dumps({k: results[-1][k] for k in ("name", "tx_per_second", "rows", "capped")}),
                      flush=True)
                partial = out.with_suffix(".partial.json")
                partial.write_text(json.dumps({"session_start_s": round(startup, 1), "runs": results}))
    finally:
        sampler.stop()
        out.write_text(json.dumps({"session_start_s": round(startup, 1), "runs": results}))
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
