"""Analysts' verdicts on cases (topic ``FRAUD_TOPIC_VERDICTS``, ``cases.verdicts``, compacted, key =
case_id): written by the dashboard's form, read by ``detectors backtest --verdicts`` and ``models``.

Value (JSON): ``case_id``, ``card_id``, ``verdict`` (``fraud`` | ``not_fraud``), ``txn_ids`` (every
transaction the case's alerts name), ``alert_ids``, ``detectors``, ``decided_at`` (event-time format,
wall clock). Idempotent by case id: marking a case again replaces its verdict (the last record per
case_id wins, and compaction keeps only it).

The join to labels (``verdict_labels``): every transaction a case's alerts name takes the case's
verdict (``is_fraud``), with scenario ``verdict``; a transaction in cases of both verdicts is fraud.
Those labels replace the simulator's for the same transactions, so precision is measured against the
analysts where they have spoken.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from common.contracts import ContractError

VERDICTS = ("fraud", "not_fraud")
VERDICT_SCENARIO = "verdict"


def verdict_record(case: dict, verdict: str, decided_at: str) -> dict:
    """The verdict record of ``case`` (a case as the case manager keeps it: ``sinks/case_logic.py``)."""
    if verdict not in VERDICTS:
        raise ContractError(f"verdict must be one of {', '.join(VERDICTS)}, got {str(verdict)[:20]!r}")
    return {"case_id": case["case_id"], "card_id": case["card_id"], "verdict": verdict,
            "txn_ids": list(case.get("txn_ids") or ()), "alert_ids": list(case.get("alert_ids") or ()),
            "detectors": list(case.get("detectors") or ()), "decided_at": decided_at}


def decode_verdict(raw: bytes | str | None) -> dict:
    try:
        value = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        raise ContractError("not valid JSON") from None
    if not isinstance(value, dict):
        raise ContractError("not a JSON object")
    if value.get("verdict") not in VERDICTS:
        raise ContractError(f"verdict must be one of {', '.join(VERDICTS)}")
    if not isinstance(value.get("case_id"), str) or not isinstance(value.get("txn_ids"), list):
        raise ContractError("a verdict needs case_id and txn_ids")
    return value


def latest_per_case(verdicts: Iterable[dict]) -> dict[str, dict]:
    """The last verdict per case_id, in the order given (the topic's order within a case's partition)."""
    return {v["case_id"]: v for v in verdicts}


def verdict_labels(verdicts: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Labels (``{txn_id, is_fraud, scenario, late}``) from the latest verdict of each case."""
    labels: dict[str, dict[str, Any]] = {}
    for verdict in latest_per_case(verdicts).values():
        fraud = verdict["verdict"] == "fraud"
        for txn_id in verdict["txn_ids"]:
            if txn_id in labels and labels[txn_id]["is_fraud"]:
                continue
            labels[txn_id] = {"txn_id": txn_id, "is_fraud": fraud, "scenario": VERDICT_SCENARIO, "late": False}
    return labels


def precision_by_detector(verdicts: Iterable[dict]) -> dict[str, dict[str, Any]]:
    """Per detector, over the cases analysts have judged that it alerted in: how many were fraud, how many
    not, and the precision (fraud / judged). A case of several detectors counts for each of them."""
    out: dict[str, dict[str, Any]] = {}
    for verdict in verdicts:
        for detector in set(verdict.get("detectors") or ()):
            counts = out.setdefault(detector, {"fraud": 0, "not_fraud": 0})
            counts[verdict["verdict"]] += 1
    for counts in out.values():
        counts["judged"] = counts["fraud"] + counts["not_fraud"]
        counts["precision"] = round(counts["fraud"] / counts["judged"], 4)
    return dict(sorted(out.items()))
