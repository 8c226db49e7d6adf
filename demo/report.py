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


def write_report(out: Path, settings: Settings, labels_path: Path, monitor: PipelineMonitor, args,
                 traffic_started: float, wall_seconds: float) -> dict:
    from detectors import registry
    from detectors.backtest import load_labels, score

    figures = monitor.snapshot()
    with monitor.lock:
        alerts = list(monitor.alerts)
        latencies = sorted(monitor.latencies)
    labels = load_labels(labels_path) if labels_path.exists() else {}
    detectors = registry.all()
    quality = score(detectors, alerts, labels)
    late = sum(1 for label in labels.values() if label.get("late"))
    first_alert = (figures["first_alert_at"] - traffic_started) if figures["first_alert_at"] else None
    report = {
        "duration_s": args.duration, "rate_target_per_s": args.rate, "wall_seconds": round(wall_seconds, 1),
        "transactions": figures["transactions"], "alerts": figures["alerts"],
        "alerts_by_detector": figures["alerts_by_detector"], "duplicate_alert_ids": figures["duplicate_alert_ids"],
        "dead_letters": figures["dead_letters"], "late_transactions": late,
        "rows_dropped_by_watermark": _watermark_drops(settings),
        "latency_s": {"p50": figures["latency_p50_s"], "p99": figures["latency_p99_s"],
                      "max": round(latencies[-1], 3) if latencies else None, "count": len(latencies)},
        "seconds_to_first_alert": round(first_alert, 1) if first_alert is not None else None,
        "quality": quality,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2))
    (out / "alerts.jsonl").write_text("".join(json.dumps(a) + "\n" for a in alerts))
    _plots(out, latencies, alerts)
    text = _markdown(report)
    (out / "report.md").write_text(text)
    report["summary_text"] = _summary(report)
    return report


def _summary(report: dict) -> str:
    rows = [f"{name}: precision {d.get('precision')}, recall {d.get('recall')}, {d.get('alerts', 0)} alerts"
            for name, d in report["quality"]["detectors"].items()]
    return ("\n".join(["demo finished:"] + [f"  {row}" for row in rows]) +
            f"\n  {report['transactions']:,} transactions, {report['dead_letters']} dead letters, "
            f"latency p50 {report['latency_s']['p50']} s / p99 {report['latency_s']['p99']} s, "
            f"duplicates {report['duplicate_alert_ids']}")


def _markdown(report: dict) -> str:
    lines = ["# Demo report", "",
             f"{report['transactions']:,} transactions in {report['duration_s']:.0f} s of traffic "
             f"(target {report['rate_target_per_s']:.0f}/s); whole run {report['wall_seconds']} s.", "",
             "| detector | alerts | precision | recall (own scenarios) |", "|---|---|---|---|"]
    for name, d in report["quality"]["detectors"].items():
        lines.append(f"| {name} | {d.get('alerts', 0)} | {d.get('precision')} | {d.get('recall')} |")
    lat = report["latency_s"]
    lines += ["", "| figure | value |", "|---|---|",
              f"| latency p50 / p99 / max (transaction into Kafka → alert written) | {lat['p50']} / {lat['p99']} / {lat['max']} s |",
              f"| time from first transaction to first alert | {report['seconds_to_first_alert']} s |",
              f"| duplicate alert ids (read_committed) | {report['duplicate_alert_ids']} |",
              f"| dead-lettered records | {report['dead_letters']} |",
              f"| late transactions (simulated, minutes behind their neighbours) | {report['late_transactions']} "
              f"({_share(report['late_transactions'], report['transactions'])}) |",
              *[f"| rows dropped by the watermark of {name} | {dropped} "
                f"({_share(dropped, report['transactions'])}) |"
                for name, dropped in report["rows_dropped_by_watermark"].items()],
              "", "![latency](latency.png)", "", "![alerts per detector](alerts.png)", ""]
    return "\n".join(lines)


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f} %" if whole else "-"


def _plots(out: Path, latencies: list[float], alerts: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from collections import Counter

    fig, ax = plt.subplots(figsize=(6, 3.5))
    if latencies:
        ax.hist(latencies, bins=40, color="#3b6ea5")
    ax.set_xlabel("seconds from transaction into Kafka to alert written")
    ax.set_ylabel("alerts")
    ax.set_title("End-to-end latency")
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
