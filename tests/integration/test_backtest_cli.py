"""``python -m detectors backtest`` end to end on a tiny input, as a user runs it: without a trained model
it leaves ml_score out in one line before Spark starts and scores the rule detectors; unreadable lines
of either input file are counted and reported (stderr, report.json, report.md), not dropped silently.
Spark only (no Kafka, no Redis)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from detectors import registry
from tests.builders import encode, txn

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_backtest_without_a_model_runs_the_rule_detectors_and_reports_unreadable_lines(tmp_path):
    swipe = dict(card="card-ds", merchant="m-ds", amount=42.0)
    lines = [encode(txn(i)) for i in range(20)] + [encode(txn(100, seconds=100, **swipe)),
                                                    encode(txn(101, seconds=130, **swipe))]
    lines[5:5] = [b"{not json", encode(txn(50, amount=-3))]            # lines 6 and 7 break the contract
    transactions = tmp_path / "transactions.jsonl"
    transactions.write_bytes(b"\n".join(lines) + b"\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"txn_id": txn(101)["txn_id"], "is_fraud": True, "scenario": "double_swipe"})
                      + "\n" + '{"is_fraud": true}\n')
    out = tmp_path / "out"
    env = dict({k: v for k, v in os.environ.items() if not k.startswith("FRAUD_MODEL_REGISTRY")},
               FRAUD_MODEL_REGISTRY=str(tmp_path / "empty-registry"), FRAUD_RUN_DIR=str(tmp_path / "run"))

    result = subprocess.run([sys.executable, "-m", "detectors", "backtest", "--transactions", str(transactions),
                             "--labels", str(labels), "--out", str(out)],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    stderr = [line for line in result.stderr.splitlines() if line.strip()]
    left_out = [i for i, line in enumerate(stderr) if "ml_score left out" in line]
    assert len(left_out) == 1 and "run `make train`" in stderr[left_out[0]]
    assert left_out[0] == 0, stderr[:3]                                   # before Spark says anything
    assert f"2 lines of {transactions} could not be read (first: line 6: value is not valid JSON)" in stderr[1:3]
    assert f"1 line of {labels} could not be read (first: line 2: no txn_id (non-empty text))" in stderr[1:3]

    report = json.loads((out / "report.json").read_text())
    assert sorted(report["detectors"]) == sorted(n for n in registry.names() if n != "ml_score")
    assert report["transactions"] == 22
    assert report["detectors"]["double_swipe"]["true_positives"] == 1
    assert report["unreadable_lines"]["transactions"] == {"path": str(transactions), "count": 2, "first_line": 6,
                                                          "first_reason": "value is not valid JSON"}
    assert report["unreadable_lines"]["labels"]["count"] == 1
    assert "2 lines of" in (out / "report.md").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["alerts.jsonl", "report.json", "report.md"]
