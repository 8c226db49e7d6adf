"""Backtest: run detectors on a static file of transactions and score them against the labels.

Definitions (every number in the report follows these):
- An alert is a **true positive** when its triggering transaction (the last of its ``txn_ids``) is labelled
  fraud; otherwise a false positive. ``precision = true positives / alerts`` (``None`` with no alerts).
- An alert **belongs to the scenario** of its triggering transaction (``"legitimate"`` if unlabelled or
  labelled not fraud).
- A fraud transaction is **detected** by a detector when some alert of that detector names it anywhere in
  its ``txn_ids`` (a card-testing burst names all its charges; a double swipe names both swipes).
  ``recall`` of a detector on a scenario = detected fraud transactions of that scenario / fraud
  transactions of that scenario. A detector's headline ``recall`` is over the scenarios it declares
  (``Detector.scenarios``) together; ``recall_all_fraud`` is over every fraud transaction.
- Transactions labelled ``late`` are kept: the backtest is static, so nothing is behind a watermark.
- ``score(..., recall_excludes=ids)`` leaves the given fraud transactions out of every recall (numerator
  and denominator) and reports how many were left out per scenario (``excluded``) and how many of those
  were detected all the same (``excluded_detected``). A streaming run uses it for late-labelled fraud: a
  transaction that arrives behind the watermark is dropped by design (and counted by Spark), so it says
  nothing about the detector. Precision is unaffected: alerts are judged by their trigger's label.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from common.contracts import EVENT_TIME_PATTERN, format_event_time
from detectors.base import TRANSACTION_SCHEMA, Detector

LEGITIMATE = "legitimate"


def load_labels(path: str | Path) -> dict[str, dict]:
    labels = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                labels[record["txn_id"]] = record
    return labels


def _ratio(numerator: int, denominator: int) -> float | None:
    return round(numerator / denominator, 4) if denominator else None


def score(detectors: list[Detector], alerts: Iterable[dict], labels: dict[str, dict],
          recall_excludes: Iterable[str] = ()) -> dict:
    """The report for ``alerts`` (of the given detectors) against ``labels``. Pure Python.

    ``recall_excludes``: fraud transactions left out of recall (e.g. late ones in a streaming run)."""
    excluded_ids = set(recall_excludes)
    fraud_by_scenario: dict[str, set[str]] = defaultdict(set)
    excluded_by_scenario: dict[str, set[str]] = defaultdict(set)
    for txn_id, label in labels.items():
        if label.get("is_fraud"):
            scenario = label.get("scenario") or "unknown"
            (excluded_by_scenario if txn_id in excluded_ids else fraud_by_scenario)[scenario].add(txn_id)
            fraud_by_scenario.setdefault(scenario, set())
    all_fraud = set().union(*fraud_by_scenario.values()) if fraud_by_scenario else set()

    by_detector: dict[str, list[dict]] = defaultdict(list)
    for alert in alerts:
        by_detector[alert["detector"]].append(alert)

    report = {"fraud_transactions": {s: len(t) for s, t in sorted(fraud_by_scenario.items())},
              "labelled_transactions": len(labels), "detectors": {}}
    if excluded_ids:
        report["excluded_from_recall"] = {s: len(t) for s, t in sorted(excluded_by_scenario.items())}
    for detector in detectors:
        found = by_detector.get(detector.name, [])
        named = {txn_id for alert in found for txn_id in alert["txn_ids"]}
        per_scenario_alerts: Counter = Counter()
        true_positives = 0
        for alert in found:
            label = labels.get(alert["txn_ids"][-1]) or {}
            if label.get("is_fraud"):
                true_positives += 1
                per_scenario_alerts[label.get("scenario") or "unknown"] += 1
            else:
                per_scenario_alerts[LEGITIMATE] += 1
        own = set().union(*(fraud_by_scenario.get(s, set()) for s in detector.scenarios)) \
            if detector.scenarios else set()
        scenarios = {}
        for scenario in sorted(set(fraud_by_scenario) | set(per_scenario_alerts)):
            fraud = fraud_by_scenario.get(scenario, set())
            scenarios[scenario] = {
                "alerts": per_scenario_alerts.get(scenario, 0),
                "fraud_transactions": len(fraud),
                "detected": len(fraud & named),
                "recall": _ratio(len(fraud & named), len(fraud)),
            }
            if excluded_ids:
                left_out = excluded_by_scenario.get(scenario, set())
                scenarios[scenario].update(excluded=len(left_out), excluded_detected=len(left_out & named))
        report["detectors"][detector.name] = {
            "version": detector.version,
            "scenarios": list(detector.scenarios),
            "alerts": len(found),
            "true_positives": true_positives,
            "false_positives": len(found) - true_positives,
            "precision": _ratio(true_positives, len(found)),
            "recall": _ratio(len(own & named), len(own)),
            "recall_all_fraud": _ratio(len(all_fraud & named), len(all_fraud)),
            "per_scenario": scenarios,
        }
    return report


def markdown(report: dict) -> str:
    def fmt(value):
        return "–" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))

    lines = ["# Backtest", "", f"Labelled transactions: {report['labelled_transactions']}; fraud by scenario: "
             + (", ".join(f"{s} {n}" for s, n in report["fraud_transactions"].items()) or "none"), ""]
    if report.get("excluded_from_recall"):
        lines += ["Left out of recall (e.g. late): " + ", ".join(
            f"{s} {n}" for s, n in report["excluded_from_recall"].items()), ""]
    lines += ["| detector | version | alerts | true pos. | precision | recall (own scenarios) | recall (all fraud) |",
              "|---|---|---|---|---|---|---|"]
    for name, d in report["detectors"].items():
        lines.append(f"| {name} | {d['version']} | {d['alerts']} | {d['true_positives']} | {fmt(d['precision'])} "
                     f"| {fmt(d['recall'])} | {fmt(d['recall_all_fraud'])} |")
    lines += ["", "## Per scenario", "", "| detector | scenario | alerts | fraud txns | detected | recall |",
              "|---|---|---|---|---|---|"]
    for name, d in report["detectors"].items():
        for scenario, s in d["per_scenario"].items():
            lines.append(f"| {name} | {scenario} | {s['alerts']} | {s['fraud_transactions']} | {s['detected']} "
                         f"| {fmt(s['recall'])} |")
    lines += ["", "An alert is a true positive when its triggering (last) transaction is labelled fraud; recall "
              "counts a fraud transaction as detected when any alert of the detector names it. "
              "See detectors/backtest.py."]
    return "\n".join(lines) + "\n"


def read_transactions(spark, path: str | Path):
    """A JSONL file in the transaction contract as a static DataFrame of ``TRANSACTION_SCHEMA``.

    Lines that do not parse or miss a required field are dropped (and counted by the caller); the
    backtest is about detectors, the runner's validation is about bad input.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    raw_schema = StructType([StructField(f.name, StringType() if f.name == "event_time" else f.dataType, True)
                             for f in TRANSACTION_SCHEMA.fields])
    raw = spark.read.schema(raw_schema).option("mode", "PERMISSIVE").json(str(path))
    parsed = raw.withColumn("event_time", F.to_timestamp(F.col("event_time"), EVENT_TIME_PATTERN))
    required = [f.name for f in TRANSACTION_SCHEMA.fields if not f.nullable]
    valid = parsed.dropna(subset=required)
    return valid


def run(detectors: list[Detector], transactions: str | Path, labels_path: str | Path, out: str | Path,
        spark=None, log=print) -> dict:
    from detectors.harness import alert_to_dict

    if spark is None:
        from common.spark import get_spark
        spark = get_spark("detectors-backtest", with_kafka=False)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    frame = read_transactions(spark, transactions).cache()
    total = frame.count()
    labels = load_labels(labels_path)
    all_alerts: list[dict] = []
    with open(out / "alerts.jsonl", "w", encoding="utf-8") as handle:
        for detector in detectors:
            found = sorted((alert_to_dict(r) for r in detector.run(frame).collect()),
                           key=lambda a: (a["event_time"], a["alert_id"]))
            detected_at = format_event_time(datetime.now(timezone.utc))
            for alert in found:
                alert["detected_at"] = detected_at
                handle.write(json.dumps(alert, sort_keys=True) + "\n")
            all_alerts.extend(found)
            log(f"{detector.name}: {len(found)} alerts")
    frame.unpersist()
    report = score(detectors, all_alerts, labels)
    report["transactions"] = total
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out / "report.md").write_text(markdown(report))
    return report
