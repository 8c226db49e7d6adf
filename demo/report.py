"""The demo's final report: per-detector precision and recall against the simulator's ground truth,
latency, throughput, late and dead-lettered counts, as Markdown + JSON + PNG plots."""

from __future__ import annotations

import json
from pathlib import Path

from common.settings import Settings
from demo.monitor import PipelineMonitor


def _watermark_drops(settings: Settings) -> dict[str, int]:
    drops = {}
    for path in sorted((settings.run_dir / "progress").glob("*.json")):
        progress = json.loads(path.read_text())
        drops[path.stem] = (progress.get("totals") or {}).get("rows_dropped_by_watermark", 0)
    return drops


def _batch_phases(settings: Settings) -> dict[str, dict]:
    """Per query: where its recent batches' time went (``spark_job.progress.where_the_time_goes``)."""
    return {path.stem: json.loads(path.read_text()).get("recent_batches") or {}
            for path in sorted((settings.run_dir / "progress").glob("*.json"))}


def _writer_phases(settings: Settings) -> dict[str, dict]:
    """Per writer (query): medians of its recent batches' run / fetch-and-send / commit (``spark_job.alert_writer``)."""
    from spark_job.query_names import is_rehearsal

    out = {}
    for path in sorted((settings.run_dir / "writers").glob("*.json")):
        if is_rehearsal(path.stem):
            continue
        phases = json.loads(path.read_text()).get("recent_phases_ms")
        if phases:
            out[path.stem] = phases
    return out


WRITER_PHASES = ("run_ms", "fetch_send_ms", "commit_ms")
PHASES = ("triggerExecution", "latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def write_report(out: Path, settings: Settings, labels_path: Path, monitor: PipelineMonitor, args,
                 traffic_started: float, wall_seconds: float, cpu_seconds: dict[str, float] | None = None) -> dict:
    from detectors import registry
    from detectors.backtest import load_labels, score

    figures = monitor.snapshot()
    with monitor.lock:
        alerts = list(monitor.alerts)
        latencies = sorted(monitor.latencies)
        lag = list(monitor.lag_samples)
        by_detector = {name: list(zip(monitor.ingested_by_detector[name], committed))
                       for name, committed in monitor.committed_by_detector.items()}
    labels = load_labels(labels_path) if labels_path.exists() else {}
    detectors = registry.resolve(list(getattr(args, "detectors", None) or ()))
    quality = score(detectors, alerts, labels)
    late = sum(1 for label in labels.values() if label.get("late"))
    first_alert = (figures["first_alert_at"] - traffic_started) if figures["first_alert_at"] else None
    last_alert = (figures["last_alert_at"] - figures["last_transaction_at"]
                  if figures["last_alert_at"] and figures["last_transaction_at"] else None)
    report = {
        "duration_s": args.duration, "rate_target_per_s": args.rate, "customers": getattr(args, "customers", None),
        "wall_seconds": round(wall_seconds, 1),
        "transactions": figures["transactions"], "alerts": figures["alerts"],
        "alerts_by_detector": figures["alerts_by_detector"], "duplicate_alert_ids": figures["duplicate_alert_ids"],
        "dead_letters": figures["dead_letters"], "late_transactions": late,
        "rows_dropped_by_watermark": _watermark_drops(settings),
        "batch_phases_ms": _batch_phases(settings),
        "writer_phases_ms": _writer_phases(settings),
        "latency_s": {"p50": figures["latency_p50_s"], "p99": figures["latency_p99_s"],
                      "max": round(latencies[-1], 3) if latencies else None, "count": len(latencies)},
        "latency_by_detector": {name: {**values, "target_p99_s": latency_target(name)}
                                for name, values in figures["latency_by_detector"].items()},
        "seconds_to_first_alert": round(first_alert, 1) if first_alert is not None else None,
        "seconds_from_last_transaction_to_last_alert": round(last_alert, 1) if last_alert is not None else None,
        "consumer_lag": lag_summary(lag, traffic_started, figures["last_transaction_at"]),
        # CPU seconds per service from the traffic's start to the drain: what a change costs, on a machine
        # whose load makes wall-clock figures move from run to run.
        "cpu_seconds": cpu_seconds or {},
        "quality": quality,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "alerts.jsonl").write_text("".join(json.dumps(a) + "\n" for a in alerts))
    _plots(out, by_detector, lag, traffic_started, alerts)
    text = _markdown(report)
    (out / "report.md").write_text(text)
    report["summary_text"] = _summary(report)
    return report


# What "real time" means for this demo: p99 from a transaction entering Kafka to its alert committed.
RULE_P99_TARGET_S = 2.0
ML_P99_TARGET_S = 5.0


def latency_target(detector: str) -> float:
    return ML_P99_TARGET_S if detector == "ml_score" else RULE_P99_TARGET_S


def lag_summary(samples: list[tuple[float, int]], traffic_started: float, traffic_ended: float | None) -> dict:
    """The largest lag (records not yet read by the slowest query) in each half of the traffic: bounded
    when the second half's is not larger than the first's."""
    end = traffic_ended or (samples[-1][0] if samples else traffic_started)
    middle = traffic_started + (end - traffic_started) / 2
    first = [lag for at, lag in samples if traffic_started <= at < middle]
    second = [lag for at, lag in samples if middle <= at <= end]
    return {"max_first_half": max(first, default=None), "max_second_half": max(second, default=None),
            "max": max((lag for _, lag in samples), default=None), "samples": len(samples)}


def _summary(report: dict) -> str:
    latency = report["latency_by_detector"]
    rows = [f"{name}: precision {d.get('precision')}, recall {d.get('recall')}, {d.get('alerts', 0)} alerts, "
            f"latency p50 {latency.get(name, {}).get('p50')} s / p99 {latency.get(name, {}).get('p99')} s "
            f"(target {latency_target(name):g} s)"
            for name, d in report["quality"]["detectors"].items()]
    return ("\n".join(["demo finished:"] + [f"  {row}" for row in rows]) +
            f"\n  {report['transactions']:,} transactions, {report['dead_letters']} dead letters, "
            f"last alert {report['seconds_from_last_transaction_to_last_alert']} s after the last transaction, "
            f"consumer lag at most {report['consumer_lag']['max_first_half']} / "
            f"{report['consumer_lag']['max_second_half']} records (first / second half of the traffic), "
            f"duplicates {report['duplicate_alert_ids']}")


def _per_thousand(value: float, transactions: int) -> str:
    return f"{1000 * value / transactions:.2f}" if transactions else "-"


def _markdown(report: dict) -> str:
    world = f", {report['customers']:,} customers" if report.get("customers") else ""
    lines = ["# Demo report", "",
             f"{report['transactions']:,} transactions in {report['duration_s']:.0f} s of traffic "
             f"(target {report['rate_target_per_s']:.0f}/s{world}); whole run {report['wall_seconds']} s.", "",
             "| detector | alerts | precision | recall (own scenarios) | latency p50 / p99 (s) | p99 target (s) | "
             "p99, second half of the traffic (s) | p99 written (s) |", "|---|---|---|---|---|---|---|---|"]
    for name, d in report["quality"]["detectors"].items():
        lat = report["latency_by_detector"].get(name, {})
        lines.append(f"| {name} | {d.get('alerts', 0)} | {d.get('precision')} | {d.get('recall')} | "
                     f"{lat.get('p50')} / {lat.get('p99')} | {latency_target(name):g} | {lat.get('second_half_p99')} | "
                     f"{lat.get('written_p99')} |")
    lat = report["latency_s"]
    lag = report["consumer_lag"]
    lines += ["", "Latency: from the triggering transaction entering Kafka to its alert committed (received by a "
              "`read_committed` reader); *written* is to the writer's `detected_at`, just before the commit. The detector "
              "job starts with the traffic, so the first half includes its JVM's warm-up; the *second half* is the "
              "alerts of the transactions that came after the traffic's midpoint.", "",
              "| figure | value |", "|---|---|",
              f"| latency p50 / p99 / max, every detector | {lat['p50']} / {lat['p99']} / {lat['max']} s |",
              f"| last alert after the last transaction | {report['seconds_from_last_transaction_to_last_alert']} s |",
              f"| consumer lag of the slowest query, max in the first / second half of the traffic | "
              f"{lag['max_first_half']} / {lag['max_second_half']} records |",
              f"| time from first transaction to first alert | {report['seconds_to_first_alert']} s |",
              f"| duplicate alert ids (read_committed) | {report['duplicate_alert_ids']} |",
              f"| dead-lettered records | {report['dead_letters']} |",
              f"| late transactions (simulated, minutes behind their neighbours) | {report['late_transactions']} "
              f"({_share(report['late_transactions'], report['transactions'])}) |",
              *[f"| rows dropped by the watermark of {name} | {dropped} "
                f"({_share(dropped, report['transactions'])}) |"
                for name, dropped in report["rows_dropped_by_watermark"].items()],
              "", "Where each query's batches (those that read input) spent their time, p50 / p99 in ms "
              "(Spark's `durationMs`; `addBatch` runs the detectors and the exactly-once write):", "",
              "| query | batches | " + " | ".join(PHASES) + " |", "|---|---|" + "---|" * len(PHASES),
              *[f"| {query} | {phases.get('batches', 0)} | " + " | ".join(
                  "{p50} / {p99}".format(**phases["ms"][name]) if name in phases.get("ms", {}) else "-"
                  for name in PHASES) + " |" for query, phases in report["batch_phases_ms"].items()],
              "", "Inside `addBatch`, the exactly-once writer's recent batches, median ms: running the batch "
              "(the detectors) into Spark's local disk, fetching its rows to the driver and handing them to "
              "the producer, flushing and committing the Kafka transaction:", "",
              "| query | run | fetch and send | commit |", "|---|---|---|---|",
              *[f"| {query} | " + " | ".join(str(phases.get(name, "-")) for name in WRITER_PHASES) + " |"
                for query, phases in report.get("writer_phases_ms", {}).items()],
              "", "CPU seconds each service used from the traffic's start to the drain (user + system, the "
              "service's processes and those it reaped), and per 1,000 transactions:", "",
              "| service | CPU s | per 1,000 transactions |", "|---|---|---|",
              *[f"| {name} | {cpu} | {_per_thousand(cpu, report['transactions'])} |"
                for name, cpu in sorted(report["cpu_seconds"].items())],
              "", "![latency](latency.png)", "", "![alerts per detector](alerts.png)", ""]
    return "\n".join(lines)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f} %" if whole else "-"


def _plots(out: Path, by_detector: dict[str, list[tuple[float, float]]], lag: list[tuple[float, int]],
           traffic_started: float, alerts: list[dict]) -> None:
    """latency.png: each detector's alerts (latency against when their transaction came in) beside its
    target, and the consumer lag below on the same time axis, so a late detector shows where and when."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from collections import Counter

    names = sorted(by_detector)
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(7, 1.6 * (len(names) + 1) + 0.6), sharex=True, squeeze=False)
    axes = axes[:, 0]
    for ax, name in zip(axes, names):
        points = sorted(by_detector[name])
        target = latency_target(name)
        if points:
            ax.plot([t - traffic_started for t, _ in points], [lat for _, lat in points], ".", markersize=3,
                    color="#3b6ea5")
        ax.axhline(target, color="#a53b3b", linewidth=0.9, linestyle="--")
        late = sum(1 for _, lat in points if lat > target)
        ax.set_title(f"{name}: {late} of {len(points)} alerts over the {target:g} s target", fontsize=8, loc="left")
        ax.set_ylabel("s", fontsize=8)
        ax.tick_params(labelsize=7)
    lag_ax = axes[-1]
    if lag:
        lag_ax.plot([at - traffic_started for at, _ in lag], [n for _, n in lag], color="#555555", linewidth=0.9)
    lag_ax.set_title("consumer lag of the slowest query (records)", fontsize=8, loc="left")
    lag_ax.set_xlabel("seconds since the traffic started (when the transaction entered Kafka)", fontsize=8)
    lag_ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(out / "latency.png", dpi=110)
    plt.close(fig)

    counts = Counter(a["detector"] for a in alerts)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar(list(counts), list(counts.values()), color="#a53b3b")
    ax.set_ylabel("alerts")
    ax.set_title("Alerts per detector")
    fig.tight_layout()
    fig.savefig(out / "alerts.png", dpi=110)
    plt.close(fig)
