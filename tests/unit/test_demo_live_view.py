"""The demo's terminal output: without a terminal a line every 10 s; the quick training's progress
relayed from its log, line by line."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from demo.__main__ import PLAIN_LINE_EVERY_S, Every
from demo.diamond import TRAIN_QUICK, LogLines, is_training_progress
from models.__main__ import _parser as models_parser
from tests.builders import T0, encode, txn


def test_a_plain_line_every_ten_seconds_however_often_the_loop_turns():
    now = [0.0]
    every = Every(PLAIN_LINE_EVERY_S, clock=lambda: now[0])
    lines = []
    for tick in range(36):                 # the loop turns every second for 35 s
        now[0] = float(tick)
        lines += [tick] if every.due() else []
    assert PLAIN_LINE_EVERY_S == 10 and lines == [0, 10, 20, 30]


def test_the_demo_trains_the_quick_preset_without_a_report():
    args = models_parser().parse_args(TRAIN_QUICK[2:])
    assert args.command == "train" and args.quick and args.no_report


def test_training_progress_is_relayed_from_the_log_as_it_grows(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("[1/1] an earlier run\n")              # a log appended to: only what comes now
    lines = LogLines(log)
    assert lines.new_lines() == []
    with open(log, "a") as out:
        out.write("[0/4] simulating 72 days\nsome warning\n[1/4] data: 690,119 trans")
        out.flush()
        assert lines.new_lines() == ["[0/4] simulating 72 days", "some warning"]
        out.write("actions\nregistered handbook-hist_gradient_boosting-quick as v1\n")
    assert lines.new_lines() == ["[1/4] data: 690,119 transactions",
                                 "registered handbook-hist_gradient_boosting-quick as v1"]
    assert LogLines(tmp_path / "absent.log").new_lines() == []
    lines = ["[0/4] simulating", "some warning", "registered x as v1"]
    assert [line for line in lines if is_training_progress(line)] == ["[0/4] simulating", "registered x as v1"]


def test_the_second_half_latency_counts_the_alerts_of_transactions_after_the_traffic_midpoint():
    from common.settings import get_settings
    from demo.monitor import PipelineMonitor
    from tests.builders import at, make_alert

    monitor = PipelineMonitor(get_settings())
    # Transactions entering Kafka at 0..100 s; a tick does not count as traffic.
    monitor._transactions([_record(f"t{s}", s) for s in range(0, 101, 10)] + [_record("tick-1", 500)])
    # Early alerts are slow (a cold JVM), late ones quick.
    for second, latency in ((0, 30.0), (20, 25.0), (40, 20.0), (50, 2.0), (70, 1.5), (90, 1.0)):
        alert = make_alert("card-1", [f"t{second}"], ingested_at=at(second))
        alert.pop("ingested_at")
        assert monitor._latency(alert, T0.timestamp() + second + latency)
    figures = monitor.snapshot()["latency_by_detector"]["double_swipe"]
    assert figures["count"] == 6 and figures["p99"] > 25
    assert figures["second_half_p99"] == pytest.approx(2.0, abs=0.05)


def test_the_monitor_counts_transactions_and_passes_over_whatever_else_the_topic_holds():
    """A flood of broken records (the chaos plan's) stopped the monitor's thread at a ``txn_id`` that was a
    list, and the report then counted 4,759 of 29,973 transactions."""
    import random

    from common.settings import get_settings
    from demo.monitor import PipelineMonitor
    from tests.e2e.chaos import garbage_records

    monitor = PipelineMonitor(get_settings())
    broken = [SimpleNamespace(key=key, value=value, timestamp=T0.timestamp() * 1000)
              for _, key, value in garbage_records(random.Random(5), 300)]
    broken += [_record("t9", 0, value) for value in (b'{"txn_id": ["t1"]}', b"[1]", b'"t"', None, b"\xff")]
    monitor._transactions(broken[:150] + [_record(f"t{i}", i) for i in range(3)] + broken[150:])
    assert monitor.transactions == 3 and set(monitor.ingested_at) == {"t0", "t1", "t2"}


def _record(txn_id: str, second: float, value: bytes | None = b""):
    """A Kafka record of transaction ``txn_id`` (card-1) entering Kafka ``second`` s after ``T0``, its event
    time; ``value`` instead of the transaction when given."""
    return SimpleNamespace(key=b"card-1", value=encode(txn(0, card="card-1", txn_id=txn_id, seconds=second))
                           if value == b"" else value, timestamp=(T0.timestamp() + second) * 1000)


def test_the_demo_can_run_some_detectors_and_then_drains_their_queries_only(tmp_path, capsys):
    from common.settings import Settings
    from demo.__main__ import parse_args
    from demo.diamond import LocalDiamond, Traffic

    args = parse_args(["--detectors", "amount_anomaly", "ml_score", "amount_anomaly"])
    assert args.detectors == ("amount_anomaly", "ml_score")
    diamond = LocalDiamond(Settings.from_env({"run_dir": tmp_path}), "r1", Traffic(seed=7, duration=1, rate=1),
                           lambda _: None, detectors=args.detectors)
    # amount_anomaly alone is not the rules group: it runs as a query of its own, not detectors-rules.
    assert sorted(diamond.writer_ids()) == ["detector-amount_anomaly", "detectors-ml"]
    assert "detectors-rules" in LocalDiamond(Settings.from_env({"run_dir": tmp_path}), "r2",
                                             Traffic(seed=7, duration=1, rate=1), lambda _: None).writer_ids()
    with pytest.raises(SystemExit) as refused:
        parse_args(["--detectors", "amount_anomaly", "no_such"])
    assert refused.value.code == 2
    assert "no detector named 'no_such'; registered: double_swipe" in capsys.readouterr().err
