"""The demo's terminal output: without a terminal a line every 10 s; the quick training's progress
relayed from its log, line by line."""

from __future__ import annotations

from demo.__main__ import PLAIN_LINE_EVERY_S, Every
from demo.diamond import TRAIN_QUICK, LogLines, is_training_progress
from models.__main__ import _parser as models_parser


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
