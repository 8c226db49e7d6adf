"""The pure parts of ``python -m bench --only metrics``: the paired cost figures (median, spread, bootstrap)
from ABBA rounds, and the stopwatch on the metrics' code counting what the plain metrics count."""

from __future__ import annotations

import json

import pytest
from prometheus_client import generate_latest

from bench.paired import paired_cost, paired_share, per_thousand
from bench.suites import metrics_cost
from bench.timed_metrics import TimedRegistry, TimedSparkMetrics
from spark_job.metrics import SparkMetrics
from tests.metrics_scrape import samples

pytestmark = pytest.mark.unit


def test_cpu_cost_is_with_over_without_minus_one_per_pair_with_its_median_and_extremes():
    got = paired_cost([1.02, 1.01, 0.99, 1.03], [1.0, 1.0, 1.0, 1.0], lower_is_better=True)
    assert got["pairs"] == 4
    assert got["per_pair_pct"] == [2.0, 1.0, -1.0, 3.0]
    assert got["median_pct"] == 1.5
    assert (got["min_pct"], got["max_pct"]) == (-1.0, 3.0)
    low, high = got["ci95_pct"]
    assert -1.0 <= low <= got["median_pct"] <= high <= 3.0


def test_throughput_cost_is_one_minus_with_over_without():
    got = paired_cost([98.0, 103.0, 100.0], [100.0, 100.0, 100.0], lower_is_better=False)
    assert got["per_pair_pct"] == [2.0, -3.0, 0.0]
    assert got["median_pct"] == 0.0


def test_the_pairing_is_by_position_so_a_slow_pair_does_not_widen_the_spread():
    # the machine's load doubles both runs of the second pair: the per-pair cost is unchanged
    got = paired_cost([1.01, 2.02], [1.0, 2.0], lower_is_better=True)
    assert got["per_pair_pct"] == [1.0, 1.0]
    assert got["ci95_pct"] == [1.0, 1.0]


def test_the_bootstrap_is_reproducible_from_the_figures():
    a, b = [1.0, 1.1, 0.97, 1.05, 1.02], [1.0] * 5
    assert paired_cost(a, b, lower_is_better=True) == paired_cost(a, b, lower_is_better=True)


def test_a_pair_without_a_figure_is_left_out_and_unpaired_runs_are_an_error():
    got = paired_cost([None, 1.1, 0.0], [1.0, 1.0, 1.0], lower_is_better=True)
    assert got["pairs"] == 1 and got["median_pct"] == 10.0
    assert paired_cost([None], [1.0], lower_is_better=True) == {"pairs": 0}
    with pytest.raises(ValueError, match="paired runs needed"):
        paired_cost([1.0, 1.0], [1.0], lower_is_better=True)


def test_a_part_s_extra_cost_is_a_share_of_the_whole_per_pair():
    # the driver spends 0.02 and 0.01 s more per 1,000 records with the feature, of 1.0 and 0.5 s in all
    got = paired_share([0.12, 0.06], [0.10, 0.05], [1.0, 0.5])
    assert got["per_pair_pct"] == [2.0, 2.0] and got["median_pct"] == 2.0
    assert paired_share([None], [0.1], [1.0]) == {"pairs": 0}
    with pytest.raises(ValueError, match="paired runs needed"):
        paired_share([0.1], [0.1], [])


def test_per_thousand():
    assert per_thousand(3.0, 60_000) == 0.05
    assert per_thousand(3.0, 0) is None and per_thousand(None, 10) is None


def bench_run(name: str, tx: float, cpu: float, rows: int = 10_000, code: dict | None = None) -> dict:
    run = {"name": name, "tx_per_second": tx, "cpu_s": cpu, "driver_cpu_s": 1.0 + (0.1 if code else 0),
           "rows": rows}
    if code is not None:
        run.update(metrics_code_s=code, metrics_scrapes=2)
    return run


def test_the_benchmark_pairs_each_rounds_on_and_off_runs_whatever_their_order():
    code = {"progress": 0.01, "writer_rows": 0.02, "writer_commit": 0.0, "scrape": 0.01}
    runs = [bench_run("metrics_on_round0", 990, 10.1, code=code), bench_run("metrics_off_round0", 1000, 10.0),
            bench_run("metrics_off_round1", 500, 20.0), bench_run("metrics_on_round1", 500, 20.0, code=code),
            bench_run("metrics_on_round2", 800, 9.0, code=code),          # round 2 lost its off-run
            {**bench_run("metrics_on_round3", 100, 9.0, rows=900, code=code), "capped": True},
            bench_run("metrics_off_round3", 1000, 10.0)]
    got = metrics_cost(runs)
    assert got["cpu_s_per_1000_on"] == [1.01, 2.0] and got["cpu_s_per_1000_off"] == [1.0, 2.0]
    assert got["cpu_cost"]["per_pair_pct"] == [1.0, 0.0]
    assert got["throughput_cost"]["per_pair_pct"] == [1.0, 0.0]
    assert got["cost_pct"] == 0.5
    # the driver's extra 0.1 s in each on-run, of the off-runs' 10 and 20 CPU seconds
    assert got["driver_cpu_cost"]["per_pair_pct"] == [1.0, 0.5]
    assert got["rounds_left_out"] == 2
    # inside metrics code: 0.08 s of the on-runs' 30.1 CPU seconds, over their 20,000 transactions
    assert got["metrics_code"]["seconds"]["writer_rows"] == 0.04
    assert got["metrics_code"]["share_of_cpu_pct"] == round(100 * 0.08 / 30.1, 3)
    assert got["metrics_code"]["us_per_transaction"] == 4.0
    assert got["metrics_code"]["scrapes"] == 4


def rows() -> list[tuple]:
    alert = json.dumps({"alert_id": "a1", "detector": "velocity"}, separators=(",", ":"))
    dead = json.dumps({"reason": "amount is negative: -3"}, separators=(",", ":"))
    return [("alert", "alerts", "card-1", alert), ("alert", "alerts", "card-1", alert), ("dlq", "dlq", "k", dead)]


def counted(metrics) -> dict:
    """The exposition's samples but the creation times of the counters."""
    return {key: value for key, value in samples(generate_latest(metrics.registry).decode()).items()
            if not key[0].endswith("_created")}


def test_the_timed_metrics_count_what_the_metrics_count_and_time_each_part():
    progress = {"name": "q", "inputRowsPerSecond": 1.0, "processedRowsPerSecond": 2.0, "sources": []}
    summary = {"name": "q", "input_rows": 3, "batch_duration_ms": 100}
    plain, timed = SparkMetrics(clock=lambda: 0.0), TimedSparkMetrics(clock=lambda: 0.0)
    for metrics in (plain, timed):
        metrics.record(progress, summary)
        tally = metrics.batch("q")
        assert list(tally.rows(iter(rows()))) == rows()
        tally.committed()
    assert counted(timed) == counted(plain)
    assert counted(timed)[("fraud_alerts_written_total", (("detector", "velocity"), ("query", "q")))] == 2
    assert timed.seconds["progress"] > 0 and timed.seconds["writer_rows"] > 0 and timed.seconds["writer_commit"] > 0
    assert timed.seconds["scrape"] == 0
    scraped = generate_latest(TimedRegistry(timed.registry, timed)).decode()
    assert 'fraud_alerts_written_total{detector="velocity",query="q"} 2.0' in scraped
    assert timed.seconds["scrape"] > 0
