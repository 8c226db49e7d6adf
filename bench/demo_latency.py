"""``make bench ONLY=demo``: what a user of ``make demo`` sees, at several rates, for two query layouts.

Each point is a whole ``python -m demo`` run (all five detectors, the exactly-once writer, the dead
letters, the Faust services, the simulator's traffic on wall-clock event time) and its report's
figures: latency from a transaction entering Kafka to its alert being committed, per detector; the
consumer lag in each half of the traffic; the last alert's delay after the traffic; where each
query's batch time went; precision and recall. The variants alternate at each rate and repeat
(``--demo-repeats``), so each sees the same machine state as the others:

- ``local`` and ``untuned`` (the default pair): the local profile in force (``common.settings.LOCAL_PROFILE``,
  the demo's rehearsal) against none of it (``FRAUD_PROFILE=cluster`` on the same ``local[2]`` master,
  no rehearsal): what the 2-core workarounds buy together.
- ``without-<workaround>`` (one per entry of ``WORKAROUNDS``): the local profile with that one
  workaround left out (its settings at Spark's defaults, or no rehearsal), against ``local``: what each
  buys on its own.
- ``groups`` and ``per_query``: the default query layout (``FRAUD_DETECTOR_GROUPS``) against one query
  per detector.
"""

from __future__ import annotations

import json
from pathlib import Path

from common.settings import get_settings
from detectors import registry

# Each workaround of the local profile and the settings it is made of; tests/unit/test_bench_variants.py
# holds this to common.settings.LOCAL_PROFILE.
WORKAROUNDS: dict[str, tuple[str, ...]] = {
    "shuffle_partitions": ("spark_shuffle_partitions",),
    "fetch_wait": ("spark_kafka_fetch_max_wait_ms",),
    "codegen": ("spark_codegen_factory_mode", "spark_codegen_large_batch_rows", "spark_codegen_cache_entries"),
}
# The workarounds outside the profile, in force on any master (the worker daemon) or in the demo only
# (its rehearsal, --warmup): the environment and the demo options that leave each out.
OTHER_WORKAROUNDS: dict[str, tuple[dict[str, str], list[str]]] = {
    "python_daemon": ({"FRAUD_SPARK_PYTHON_DAEMON": ""}, []),
    "rehearsal": ({}, ["--warmup", "0"]),
}
VARIANTS = ("local", "untuned", "groups", "per_query", *(f"without-{name}" for name in (*WORKAROUNDS, *OTHER_WORKAROUNDS)))
DEFAULT_VARIANTS = ("local", "untuned")
DETECTORS = ("double_swipe", "impossible_travel", "amount_anomaly", "velocity", "ml_score")


def variant_run(variant: str) -> tuple[dict[str, str], list[str]]:
    """The environment and the extra ``python -m demo`` options of a variant."""
    if variant == "untuned":
        return {"FRAUD_PROFILE": "cluster"}, ["--warmup", "0"]
    if variant == "per_query":      # a one-member group is a query of its own
        return {"FRAUD_DETECTOR_GROUPS": ";".join(f"{name}={name}" for name in registry.names())}, []
    if variant.startswith("without-"):
        name = variant.removeprefix("without-")
        if name in OTHER_WORKAROUNDS:
            env, extra = OTHER_WORKAROUNDS[name]
            return {"FRAUD_PROFILE": "local", **env}, extra
        return {"FRAUD_PROFILE": "local", **spark_defaults(WORKAROUNDS[name])}, []
    if variant == "groups":
        return {"FRAUD_DETECTOR_GROUPS": get_settings().detector_groups}, []
    return {"FRAUD_PROFILE": "local"}, []


def spark_defaults(fields: tuple[str, ...]) -> dict[str, str]:
    """The environment that gives ``fields`` their cluster profile's value (Spark's defaults)."""
    import dataclasses

    from common.settings import Settings, _render

    by_name = {f.name: f for f in dataclasses.fields(Settings)}
    return {by_name[name].metadata["env"]: _render(by_name[name].default) for name in fields}


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


def run_order(variants: tuple[str, ...], repeats: int) -> list[tuple[str, int]]:
    """(variant, repeat) in the order they run: the variants alternate, each pair in the other order
    than the one before, so a trend in the machine's state weighs on every variant alike."""
    order = []
    for k in range(repeats):
        order += [(v, k + 1) for v in (variants if k % 2 == 0 else tuple(reversed(variants)))]
    return order


def bench_demo(run, rates: list[int], duration_s: float, variants: tuple[str, ...] = DEFAULT_VARIANTS,
               repeats: int = 1) -> dict:
    """``{rate: {"variant#k": figures}}``; a run that fails records its error and the others go on."""
    results: dict[str, dict] = {}
    for rate in rates:
        points: dict[str, dict] = {}
        for variant, k in run_order(variants, repeats):
            label = f"{variant}#{k}"
            run.set_phase(f"demo: {label} at {rate:,} tx/s for {duration_s:.0f} s")
            out = run.out_dir / "demo" / f"{variant}-{k}-{rate}"
            env, extra = variant_run(variant)
            child = run.child(f"demo-{variant}-{k}-{rate}",
                              ["-m", "demo", "--duration", str(duration_s), "--rate", str(rate), "--no-live",
                               "--drain-timeout", "600", "--out", str(out), *extra], env=env)
            try:
                run.wait_exit(child, duration_s + 900, f"the demo ({label}, {rate} tx/s)")
                points[label] = figures(json.loads((out / "report.json").read_text()))
            except Exception as error:  # keep the other points
                points[label] = {"error": str(error)[-1500:]}
            run.log(f"    {label:<12} {rate:>6,}/s: " + summary_line(points[label]))
        results[str(rate)] = points
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
    lines = ["## make demo at several rates: the variants side by side, in the order they ran",
             "",
             "Each cell: a whole `python -m demo` run; p99 latency from a transaction entering Kafka to its alert "
             "being committed (s), in brackets over the alerts of the traffic's second half (the job's JVM warm), "
             "consumer lag max in the traffic's first → second half (records), the last alert's delay after the "
             "traffic (s).",
             "",
             "| rate (tx/s) | variant | " + " | ".join(f"{d} p99" for d in DETECTORS) + " | lag 1st → 2nd half | last alert (s) | "
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
    labels = sorted({label for layouts in demo.values() for label in layouts})
    for label, style in zip(labels, ("-o", "--s", ":^", "-.v") * 8):
        for name in DETECTORS:
            points = [(int(rate), layouts[label]["latency_by_detector"][name]["p99"])
                      for rate, layouts in demo.items()
                      if "error" not in layouts.get(label, {"error": 1})
                      and layouts[label]["latency_by_detector"].get(name, {}).get("p99") is not None]
            if points:
                ax.plot(*zip(*sorted(points)), style, label=f"{name} ({label})")
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
