"""The benchmark suite's plumbing: tiny sizes, well under a minute.

The pure part (generator + baseline detection) needs no broker; the second test runs
``python -m bench --quick --only python faust`` against the local stack end to end (data on a per-run topic,
the kafka-python and the Faust baseline children, alerts read back, JSON + Markdown + plots written,
topics deleted).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid

import pytest

from bench.baselines.logic import Detection
from bench.suites import BenchRun, Sizes
from bench.workload import Workload, generate
from common.contracts import decode_transaction
from common.settings import REPO_ROOT


def test_generator_is_in_the_contract_and_the_baseline_finds_every_double_swipe():
    keys, values, truth = generate(Workload(count=4000, cards=500, seed=3))
    assert len(values) == truth["transactions"] == 4000
    for key, value in zip(keys, values):
        assert decode_transaction(value, key=key, check_key=True)["card_id"] == key.decode()
    detection, out = Detection(), []
    for i, (key, value) in enumerate(zip(keys, values)):
        detection.process(value, key, "t", i % 12, i, 0, out)
        if i % 500 == 499:
            detection.end_batch(out)
    detection.end_batch(out)
    alerts = [json.loads(v) for kind, _, v in out if kind == "alert"]
    swipes = [a for a in alerts if a["detector"] == "double_swipe"]
    assert len(swipes) >= truth["double_swipes"] > 0
    assert all(a["txn_ids"][0] != a["txn_ids"][1] and 0 <= a["evidence"]["gap_seconds"] <= 60 for a in swipes)
    assert len({a["alert_id"] for a in alerts}) == len(alerts)
    assert detection.counts["late_dropped"] == 0


def test_bench_quick_baselines_end_to_end(stack):
    run_id = f"smoke-{uuid.uuid4().hex[:8]}"
    out_dir = REPO_ROOT / "artifacts" / "bench" / run_id
    try:
        result = subprocess.run([sys.executable, "-m", "bench", "--quick", "--only", "python", "faust", "--count",
                                 "3000", "--cards", "1000", "--run-id", run_id], cwd=REPO_ROOT, capture_output=True,
                                text=True, timeout=240, env={**stack.to_env(), "PATH": "/usr/bin:/bin"})
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        doc = json.loads((out_dir / "results.json").read_text())
        truth = doc["benchmarks"]["pipeline"]["1000"]["data"]["truth"]
        for name in ("python_1p", "faust_1p"):
            variant = doc["benchmarks"]["pipeline"]["1000"]["variants"][name]
            assert variant["rows"] == 3000 and not variant["capped"] and variant["tx_per_second"] > 0, \
                json.dumps(variant, indent=1, default=str) + result.stdout[-2000:]
            assert variant["alerts"]["double_swipe"] >= truth["double_swipes"] > 0
        assert doc["machine"]["cpus"] and doc["load_samples"] and doc["leftover_processes"] == []
        assert doc["spark_settings"]["spark_gc"] == stack.spark_gc
        assert "python_1p" in (out_dir / "results.md").read_text()
        assert f"{stack.spark_gc} collector" in (out_dir / "results.md").read_text()
        assert (out_dir / "throughput_vs_cards.png").exists()
        from common.kafka_admin import admin_client

        with admin_client(stack) as admin:
            assert not [t for t in admin.list_topics() if t.startswith(f"bench.{run_id}.")]
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def test_a_run_refuses_the_topics_an_interrupted_run_of_its_id_left(stack, tmp_path):
    """A reused --run-id would append a second copy of the data to the leftover topic and read both."""
    run_id = f"smoke-{uuid.uuid4().hex[:8]}"
    interrupted = BenchRun(stack, Sizes.for_mode(True), run_id, tmp_path, procs=None)
    try:
        interrupted.topic("tx.1000", 1)           # ...and no cleanup(): the run was killed here
        again = BenchRun(stack, Sizes.for_mode(True), run_id, tmp_path, procs=None)
        with pytest.raises(RuntimeError, match=f"bench.{run_id}.tx.1000 exists already"):
            again.topic("tx.1000", 1)
    finally:
        interrupted.cleanup()
