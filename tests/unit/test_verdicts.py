"""Analysts' verdicts (common/verdicts.py, sinks/dashboard/verdicts.py): the record, the join to labels
that backtests use, and which Origin may post one. Pure logic."""

from __future__ import annotations

import json

import pytest

from common.contracts import ContractError
from common.verdicts import decode_verdict, verdict_labels, verdict_record
from detectors import backtest, velocity
from sinks.case_logic import apply_alert
from sinks.dashboard.hosts import LOOPBACK_NAMES
from sinks.dashboard.verdicts import origin_allowed
from tests.builders import make_alert

pytestmark = pytest.mark.unit


def test_a_verdict_names_every_transaction_of_its_case():
    case = apply_alert(apply_alert(None, make_alert("card-1", ["t1", "t2"], event_s=1)),
                       make_alert("card-1", ["t3"], event_s=60))
    record = verdict_record(case, "not_fraud", "2026-11-26T10:00:00.000Z")
    assert record["case_id"] == case["case_id"] and sorted(record["txn_ids"]) == ["t1", "t2", "t3"]
    assert decode_verdict(json.dumps(record)) == record
    with pytest.raises(ContractError, match="verdict must be one of fraud, not_fraud"):
        verdict_record(case, "maybe", "2026-11-26T10:00:00.000Z")


def test_the_latest_verdict_of_a_case_labels_its_transactions_and_fraud_wins_across_cases():
    first = {"case_id": "c1", "verdict": "fraud", "txn_ids": ["t1", "t2"]}
    changed = {"case_id": "c1", "verdict": "not_fraud", "txn_ids": ["t1", "t2"]}
    other = {"case_id": "c2", "verdict": "fraud", "txn_ids": ["t2", "t9"]}
    labels = verdict_labels([first, changed, other])
    assert {t: label["is_fraud"] for t, label in labels.items()} == {"t1": False, "t2": True, "t9": True}
    assert labels["t1"]["scenario"] == "verdict"


def test_precision_is_measured_against_the_analysts_where_they_spoke():
    simulator = {"t1": {"txn_id": "t1", "is_fraud": True, "scenario": "card_testing"}}
    alert = {"alert_id": "a", "detector": "velocity", "txn_ids": ["t0", "t1"], "event_time": "x"}
    assert backtest.score([velocity.DETECTOR], [alert], simulator)["detectors"]["velocity"]["precision"] == 1.0
    analysts = {**simulator, **verdict_labels([{"case_id": "c", "verdict": "not_fraud", "txn_ids": ["t0", "t1"]}])}
    assert backtest.score([velocity.DETECTOR], [alert], analysts)["detectors"]["velocity"]["precision"] == 0.0


@pytest.mark.parametrize("origin, allowed", [
    ("http://127.0.0.1:8765", True), ("http://localhost:18092", True), ("http://[::1]:8765", True),
    (None, False), ("", False), ("null", False), ("http://attacker.example", False),
    ("http://127.0.0.1.attacker.example", False), ("file://127.0.0.1", False),
])
def test_only_the_dashboards_own_page_may_post_a_verdict(origin, allowed):
    assert origin_allowed(origin, LOOPBACK_NAMES) is allowed


def test_model_training_takes_the_verdicts_as_labels_of_the_transactions_they_name():
    import pandas as pd

    from models.training import apply_verdicts

    frame = pd.DataFrame({"txn_id": ["t1", "t2", "t3"], "is_fraud": pd.Series([1, 0, 0], dtype="int8"),
                          "scenario": ["card_testing", "legitimate", "legitimate"]})
    matched = apply_verdicts(frame, [{"case_id": "c1", "verdict": "not_fraud", "txn_ids": ["t1"]},
                                     {"case_id": "c2", "verdict": "fraud", "txn_ids": ["t2", "t9"]}])
    assert matched == 2
    assert frame["is_fraud"].tolist() == [0, 1, 0] and frame["scenario"].tolist() == ["verdict", "verdict", "legitimate"]


def test_precision_by_detector_counts_each_judged_case_for_each_of_its_detectors():
    from common.verdicts import precision_by_detector

    verdicts = [{"verdict": "fraud", "detectors": ["velocity", "ml_score"]},
                {"verdict": "not_fraud", "detectors": ["ml_score"]},
                {"verdict": "fraud", "detectors": ["ml_score", "ml_score"]},   # a detector counts once per case
                {"verdict": "not_fraud", "detectors": []}]
    assert precision_by_detector(verdicts) == {
        "ml_score": {"fraud": 2, "not_fraud": 1, "judged": 3, "precision": 0.6667},
        "velocity": {"fraud": 1, "not_fraud": 0, "judged": 1, "precision": 1.0}}
