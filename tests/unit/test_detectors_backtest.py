"""Backtest metrics and the robust statistics of amount_anomaly: pure Python."""

from __future__ import annotations

import numpy as np
import pytest

from common.contracts import alert_id
from detectors import backtest, registry
from detectors.amount_anomaly import AmountAnomalyParams, score_amounts


def alert(detector, *txn_ids):
    return {"detector": detector, "txn_ids": list(txn_ids), "alert_id": alert_id(detector, txn_ids)}


LABELS = {
    "ds1b": {"txn_id": "ds1b", "is_fraud": True, "scenario": "double_swipe"},
    "ds2b": {"txn_id": "ds2b", "is_fraud": True, "scenario": "double_swipe"},
    "ct1": {"txn_id": "ct1", "is_fraud": True, "scenario": "card_testing"},
    "ct2": {"txn_id": "ct2", "is_fraud": True, "scenario": "card_testing"},
    "ct3": {"txn_id": "ct3", "is_fraud": True, "scenario": "card_testing"},
    "ok": {"txn_id": "ok", "is_fraud": False, "scenario": None},
}


def test_precision_counts_the_triggering_transaction_and_recall_any_named_one():
    alerts = [alert("double_swipe", "ds1a", "ds1b"),      # TP (trigger ds1b is fraud)
              alert("double_swipe", "ds1b", "x"),         # FP (trigger x unlabelled), still names ds1b
              alert("velocity", "ct1", "ct2"),            # TP, names 2 of 3 card-testing txns
              alert("velocity", "ok", "zz")]              # FP
    report = backtest.score([registry.get("double_swipe"), registry.get("velocity")], alerts, LABELS)
    ds = report["detectors"]["double_swipe"]
    assert (ds["alerts"], ds["true_positives"], ds["false_positives"], ds["precision"]) == (2, 1, 1, 0.5)
    assert ds["recall"] == 0.5                              # ds1b of {ds1b, ds2b}
    assert ds["per_scenario"]["double_swipe"] == {"alerts": 1, "fraud_transactions": 2, "detected": 1, "recall": 0.5}
    assert ds["per_scenario"]["legitimate"]["alerts"] == 1
    assert ds["per_scenario"]["card_testing"]["recall"] == 0.0
    v = report["detectors"]["velocity"]
    assert v["precision"] == 0.5 and v["recall"] == pytest.approx(0.6667, abs=1e-4)
    assert v["recall_all_fraud"] == pytest.approx(2 / 5, abs=1e-4)
    assert report["fraud_transactions"] == {"card_testing": 3, "double_swipe": 2}


def test_recall_can_leave_out_transactions_such_as_late_ones():
    alerts = [alert("double_swipe", "ds1a", "ds1b"), alert("velocity", "ct1", "ct2")]
    report = backtest.score([registry.get("double_swipe"), registry.get("velocity")], alerts, LABELS,
                            recall_excludes={"ds2b", "ct2"})
    ds = report["detectors"]["double_swipe"]
    assert ds["recall"] == 1.0 and ds["precision"] == 1.0                  # ds2b is out of the denominator
    assert ds["per_scenario"]["double_swipe"] == {"alerts": 1, "fraud_transactions": 1, "detected": 1,
                                                  "recall": 1.0, "excluded": 1, "excluded_detected": 0}
    v = report["detectors"]["velocity"]
    assert v["recall"] == 0.5                                              # ct1 of {ct1, ct3}
    assert v["per_scenario"]["card_testing"]["excluded_detected"] == 1     # ct2 was named all the same
    assert report["excluded_from_recall"] == {"card_testing": 1, "double_swipe": 1}
    assert "Left out of recall" in backtest.markdown(report)


def test_no_alerts_means_no_precision_and_zero_recall():
    report = backtest.score([registry.get("impossible_travel")], [], LABELS)
    d = report["detectors"]["impossible_travel"]
    assert d["precision"] is None and d["alerts"] == 0 and d["recall"] is None   # no such fraud labelled
    assert "| impossible_travel |" in backtest.markdown(report)


def test_load_labels(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text('{"txn_id": "a", "is_fraud": true, "scenario": "double_swipe", "late": false}\n\n'
                    '{"txn_id": "b", "is_fraud": false, "scenario": null}\n')
    assert set(backtest.load_labels(path)) == {"a", "b"}


def test_robust_scores():
    params = AmountAnomalyParams()
    history = np.array([30.0, 35, 40, 42, 38, 31, 45, 39, 36, 41])
    found, new_history = score_amounts(history, np.array([44.0, 400.0, 41.0]), params)
    assert [f[0] for f in found] == [1]
    index, median, mad, robust_z, ratio, count = found[0]
    assert median == pytest.approx(np.median(np.append(history, 44.0)))
    assert ratio > 9 and robust_z > params.min_robust_z and count == 11
    assert list(new_history[-3:]) == [44.0, 400.0, 41.0]


def test_little_history_never_alerts_and_history_is_capped():
    params = AmountAnomalyParams(history_size=5, min_history=3)
    found, history = score_amounts(np.array([]), np.array([10.0, 10.0, 1000.0]), params)
    assert found == []                                      # only two earlier amounts at the spike
    found, history = score_amounts(history, np.array([10.0, 10.0, 1000.0]), params)
    assert len(found) == 1 and len(history) == 5


def test_a_burst_of_rapid_charges_is_learnt_once():
    """A card-testing burst must not become the card's history (its median would collapse to ~2)."""
    params = AmountAnomalyParams()
    minute = 60_000
    ordinary = np.array([40.0, 55.0, 38.0])
    burst = np.round(np.linspace(0.5, 3.0, 10), 2)
    amounts = np.concatenate([ordinary, burst, [60.0]])
    times = np.concatenate([np.arange(3) * 600 * minute, 2000 * minute + np.arange(10) * 20_000,
                            [3000 * minute]])
    found, history = score_amounts(np.array([]), amounts, params)            # no times: every amount learnt
    assert [f[0] for f in found] == [13]                                       # 60.00 looks like a 20x spike
    found, history = score_amounts(np.array([]), amounts, params, times)
    assert found == [] and list(history) == [40.0, 55.0, 38.0, 0.5, 60.0]      # first charge of the burst only
    # Across micro-batches: a charge 30 s after the newest one seen before is not learnt either.
    _, history = score_amounts(history, np.array([2.0]), params, np.array([3000 * minute + 30_000]), 3000 * minute)
    assert len(history) == 5

