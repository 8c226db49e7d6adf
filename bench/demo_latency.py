"""``make bench ONLY=demo``: what a user of ``make demo`` sees, at several rates, for two query layouts.

Each point is a whole ``python -m demo`` run (all five detectors, the exactly-once writer, the dead
letters, the Faust services, the simulator's traffic on wall-clock event time) and its report's
figures: latency from a transaction entering Kafka to its alert being committed, per detector; the
consumer lag in each half of the traffic; the last alert's delay after the traffic; where each
query's batch time went; precision and recall. The layouts alternate at each rate, so both see the
same machine state: ``groups`` (the default, ``FRAUD_DETECTOR_GROUPS``) and ``per_query`` (one query
per detector, the layout before the groups).
"""

from __future__ import annotations

import json
from pathlib import Path

from common.settings import get_settings
from detectors import registry

LAYOUTS = ("groups", "per_query")
DETECTORS = ("double_swipe", "impossible_travel", "amount_anomaly", "velocity", "ml_score")


def layout_groups(layout: str) -> str:
    """The ``FRAUD_DETECTOR_GROUPS`` value of a layout (a one-member group is a query of its own)."""
    if layout == "groups":
        return get_settings().detector_groups
    return ";".join(f"{name}={name}" for name in registry.names())


def figures(report: dict) -> dict:
    """The report's figures this benchmark compares."""
    quality = report.get("quality", {}).get("detectors", {})
    return {
        "transactions": report.get("transactions"),
        "achieved_rate": round(report["transactions"] / report["duration_s"], 1) if report.get("duration_s") else None,
        "wall_seconds": report.get("wall_seconds"),
        "latency_by_detector": {name: {k: d.get(k) for k in ("p50", "p99", "second_half_p99", "count",
                                                                        "target_p99_s")}
                                for name, d in report.get("latency_by_detector", {}).items()},
        "consumer_lag": report.get("consumer_lag"),
        "last_alert_after_traffic_s": report.get("seconds_from_last_transaction_to_last_alert"),
        "batch_phases_ms": report.get("batch_phases_ms"),
        "quality": {name: {k: d.get(k) for k in ("precision", "recall", "alerts")} for name, d in quality.items()},
        "duplicate_alert_ids": report.get("duplicate_alert_ids"),
        "cpu_seconds": report.get("cpu_seconds"),
    }


def detector_cpu_per_thousand(point: dict) -> float | None:
    """The detector job's CPU seconds per 1,000 transactions: a layout's cost, robust to the machine's load."""
    cpu, count = (point.get("cpu_seconds") or {}).get("detectors"), point.get("transactions")
    return round(1000 * cpu / count, 2) if cpu is not None and count else None


def bench_demo(run, rates: list[int], duration_s: float) -> dict:
    """``{rate: {layout: figures}}``; a layout that fails at a rate records its error and goes on."""
    results: dict[str, dict] = {}
    for i, rate in enumerate(rates):
        per_layout: dict[str, dict] = {}
        for layout in (LAYOUTS if i % 2 == 0 else tuple(reversed(LAYOUTS))):
            run.set_phase(f"demo: {layout} at {rate:,} tx/s for {duration_s:.0f} s")
            out = run.out_dir / "demo" / f"{layout}-{rate}"
            child = run.child(f"demo-{layout}-{rate}",
                              ["-m", "demo", "--duration", str(duration_s), "--rate", str(rate), "--no-live",
                               "--drain-timeout", "600", "--out", str(out)],
                              env={"FRAUD_DETECTOR_GROUPS": layout_groups(layout)})
            try:
                run.wait_exit(child, duration_s + 900, f"the demo ({layout}, {rate} tx/s)")
                per_layout[layout] = figures(json.loads((out / "report.json").read_text()))
            except Exception as error:  # keep the other points
                per_layout[layout] = {"error": str(error)[-1500:]}
            run.log(f"    {layout:<10} {rate:>6,}/s: " + summary_line(per_layout[layout]))
        results[str(rate)] = per_layout
    return results


def summary_line(point: dict) -> str:
    if "error" in point:
        return "failed: " + point["error"].splitlines()[0]
    p99 = ", ".join(f"{name} {d['p99']}" for name, d in point["latency_by_detector"].items())
    lag = point.get("consumer_lag") or {}
    return (f"p99 (s) {p99}; lag {lag.get('max_first_half')} -> {lag.get('max_second_half')}; "
            f"last alert {point['last_alert_after_traffic_s']} s after the traffic")


def markdown(demo: dict) -> list[str]:
    """The section of results.md: p99 per detector per layout and rate, lag, last alert, quality."""
    lines = ["## make demo at several rates: both query layouts side by side",
             "",
             "Each cell: a whole `python -m demo` run; p99 latency from a transaction entering Kafka to its alert "
             "being committed (s), in brackets over the alerts of the traffic's second half (the job's JVM warm), "
             "consumer lag max in the traffic's first → second half (records), the last alert's delay after the "
             "traffic (s).",
             "",
             "| rate (tx/s) | layout | " + " | ".join(f"{d} p99" for d in DETECTORS) + " | lag 1st → 2nd half | last alert (s) | "
             "recall (min over detectors) | detector job CPU s per 1,000 tx |",
             "|---:|---|" + "---:|" * len(DETECTORS) + "---|---:|---:|---:|"]
    for rate, layouts in demo.items():
        for layout, point in layouts.items():
            if "error" in point:
                lines.append(f"| {int(rate):,} | {layout} | failed: {point['error'].splitlines()[0][:80]} |")
                continue
            lat = point["latency_by_detector"]
            lag = point.get("consumer_lag") or {}
            recalls = [q["recall"] for q in point["quality"].values() if q.get("recall") is not None]
            lines.append(f"| {int(rate):,} | {layout} | "
                         + " | ".join(latency_cell(lat.get(d, {})) for d in DETECTORS)
                         + f" | {lag.get('max_first_half')} → {lag.get('max_second_half')} | "
                         f"{point['last_alert_after_traffic_s']} | {min(recalls) if recalls else '–'} | "
                         f"{detector_cpu_per_thousand(point)} |")
    return lines + [""]


def latency_cell(figures: dict) -> str:
    """``p99 (p99 over the second half)``; an older point without the second half shows p99 alone."""
    if figures.get("p99") is None:
        return "–"
    warm = figures.get("second_half_p99")
    return f"{figures['p99']}" + (f" ({warm})" if warm is not None else "")


def plot(demo: dict, out_dir: Path) -> str | None:
    """p99 against rate, one line per detector and layout."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for layout, style in zip(LAYOUTS, ("-o", "--s")):
        for name in DETECTORS:
            points = [(int(rate), layouts[layout]["latency_by_detector"][name]["p99"])
                      for rate, layouts in demo.items()
                      if "error" not in layouts.get(layout, {"error": 1})
                      and layouts[layout]["latency_by_detector"].get(name, {}).get("p99") is not None]
            if points:
                ax.plot(*zip(*sorted(points)), style, label=f"{name} ({layout})")
    ax.axhline(2.0, color="grey", linewidth=0.8)
    ax.axhline(5.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xlabel("offered load (tx/s)")
    ax.set_ylabel("p99 into Kafka → alert committed (s)")
    ax.set_title("make demo: p99 latency per detector against rate")
    ax.legend(fontsize=7)
    path = out_dir / "demo_latency.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return str(path)
