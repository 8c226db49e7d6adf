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

import contextlib
import json
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from common.contracts import EVENT_TIME_PATTERN, ContractError, decode_transaction, format_event_time
from detectors.base import TRANSACTION_SCHEMA, Detector

LEGITIMATE = "legitimate"


@dataclass
class Unreadable:
    """The lines of an input file that could not be read: how many, and the first one's number and why.
    Blank lines are not counted: they hold nothing."""
    path: str
    count: int = 0
    first_line: int | None = None
    first_reason: str | None = None

    def add(self, number: int, reason: str) -> None:
        self.count += 1
        if self.first_line is None:
            self.first_line, self.first_reason = number, reason

    def summary(self) -> str:
        """``N lines of FILE could not be read (first: line K: reason)``."""
        lines = "line" if self.count == 1 else "lines"
        return (f"{self.count} {lines} of {self.path} could not be read"
                + (f" (first: line {self.first_line}: {self.first_reason})" if self.count else ""))

    def as_dict(self) -> dict:
        return {"path": self.path, "count": self.count, "first_line": self.first_line,
                "first_reason": self.first_reason}


def decode_label(raw: bytes) -> dict:
    """One line of a labels file: ``{"txn_id": non-empty text, "is_fraud": true|false, "scenario": text or
    null, "late": true|false}`` (scenario and late optional); ``ContractError`` otherwise."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        raise ContractError("not valid JSON") from None
    if not isinstance(record, dict):
        raise ContractError(f"a JSON {type(record).__name__}, not an object")
    if not isinstance(record.get("txn_id"), str) or not record["txn_id"]:
        raise ContractError("no txn_id (non-empty text)")
    if not isinstance(record.get("is_fraud"), bool):
        raise ContractError("no is_fraud (true or false)")
    if not isinstance(record.get("scenario"), (str, type(None))):
        raise ContractError("scenario is neither text nor null")
    if not isinstance(record.get("late", False), bool):
        raise ContractError("late is neither true nor false")
    return record


def load_labels(path: str | Path, unreadable: Unreadable | None = None) -> dict[str, dict]:
    """The labels of a JSONL file by txn_id. A line that is not a label (``decode_label``) raises
    ``ContractError``, or, given ``unreadable``, is counted there and left out."""
    labels = {}
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                record = decode_label(raw)
            except ContractError as error:
                if unreadable is None:
                    raise ContractError(f"{path}: line {number}: {error}") from None
                unreadable.add(number, str(error))
                continue
            labels[record["txn_id"]] = record
    return labels


def screen_transactions(path: str | Path, scratch: Path) -> tuple[Unreadable, Path]:
    """Check every line of a transactions file against the transaction contract (``decode_transaction``,
    what ``python -m producers replay`` checks). Returns the unreadable lines and the file Spark should
    read: ``path`` itself when every line is readable, else ``scratch`` with the readable lines only."""
    unreadable = Unreadable(str(path))
    bad: set[int] = set()
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            line = raw.rstrip(b"\r\n")
            if not line.strip():
                continue
            try:
                decode_transaction(line)
            except ContractError as error:
                unreadable.add(number, str(error))
                bad.add(number)
    if not bad:
        return unreadable, Path(path)
    with open(path, "rb") as source, open(scratch, "wb") as target:
        target.writelines(raw for number, raw in enumerate(source, 1) if number not in bad and raw.strip())
    return unreadable, scratch


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
    if "unreadable_lines" in report:
        found = [Unreadable(**u).summary() + ", left out" for u in report["unreadable_lines"].values() if u["count"]]
        lines += ["Unreadable input lines: " + ("; ".join(found) if found else "none") + ".", ""]
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

    Lines that do not parse or miss a required field are dropped; ``run`` hands it only lines that
    ``screen_transactions`` read, having counted and reported the others. The backtest is about
    detectors, the runner's validation is about bad input.
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


def run(detectors: list[Detector], transactions: str | Path, labels_path: str | Path | None, out: str | Path,
        spark=None, log=print, verdicts: list[dict] | None = None) -> dict:
    """Backtest ``detectors`` on the transactions file against the labels file: alerts.jsonl, report.json
    and report.md in ``out``; returns the report. Lines of either file that cannot be read are left out,
    counted in the report (``unreadable_lines``) and reported through ``log`` (one line per file).
    ``verdicts`` (records of the verdicts topic) label the transactions of the cases analysts marked,
    over the file's labels (``common.verdicts.verdict_labels``); ``labels_path`` may then be None."""
    from common.verdicts import verdict_labels

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as cleanup:
        # The input files are read (and their unreadable lines reported) before Spark starts.
        scratch = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix=".backtest-", dir=out)))
        unreadable_labels = Unreadable(str(labels_path))
        labels = load_labels(labels_path, unreadable_labels) if labels_path is not None else {}
        if verdicts is not None:
            by_analysts = verdict_labels(verdicts)
            labels.update(by_analysts)
            log(f"{len(by_analysts)} transactions labelled by {len(verdicts)} verdicts")
        unreadable_transactions, readable = screen_transactions(transactions, scratch / "transactions.jsonl")
        for unreadable in (unreadable_transactions, unreadable_labels):
            if unreadable.count:
                log(unreadable.summary())
        if spark is None:
            from common.spark import get_spark
            spark = get_spark("detectors-backtest", with_kafka=False)
        report = _run(spark, detectors, readable, labels, out, log)
    if verdicts is not None:
        report["verdict_labels"] = len(verdict_labels(verdicts))
    report["unreadable_lines"] = {"transactions": unreadable_transactions.as_dict(),
                                  "labels": unreadable_labels.as_dict()}
    (out / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out / "report.md").write_text(markdown(report))
    return report


def _run(spark, detectors: list[Detector], transactions: Path, labels: dict[str, dict], out: Path, log) -> dict:
    from detectors.harness import alert_to_dict

    frame = read_transactions(spark, transactions).cache()
    total = frame.count()
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
    return report
