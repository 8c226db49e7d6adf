"""``python -m models train --quick``: its options, and its progress (a line per step without a terminal,
a bar with one). The quick model itself is trained in tests/integration/test_models_quick_cli.py."""

from __future__ import annotations

import io

import pytest

from common.cli_errors import UserError
from models import training
from models.__main__ import main
from models.progress import terminal_progress


def test_quick_keeps_explicit_folds_and_models_and_terminals_need_the_handbook_world(tmp_path):
    with pytest.raises(UserError, match="--terminals is for the handbook profile only"):
        main(["train", "--quick", "--profile", "default", "--terminals", "300", "--registry", str(tmp_path)])
    with pytest.raises(UserError, match="--days 72 is too few for 2 validation and test folds"):
        main(["train", "--quick", "--folds", "2", "--days", "72", "--registry", str(tmp_path)])


def test_progress_is_plain_lines_without_a_terminal_and_a_bar_with_one():
    plain = io.StringIO()
    with terminal_progress(plain) as report:
        report(0, 2, "simulating")
        report(1, 2, "data")
    assert plain.getvalue() == "[0/2] simulating\n[1/2] data\n"

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    tty = Terminal()
    with terminal_progress(tty) as report:
        report(1, 2, "fold one")
        report(2, 2, "fold two")
    out = tty.getvalue()
    assert "[1/2] fold one" in out and "[2/2] fold two" in out and "\x1b[" in out   # lines above a live bar


def test_every_step_of_a_run_is_reported_in_order():
    config = training.TrainConfig(folds=2, models=("a", "b"))
    heard = []
    steps = training.Steps(lambda done, total, text: heard.append((done, total, text)), 1 + 2 * 2 * 2)
    for text in ("features", *[f"{m} fold {i}" for m in config.models for i in range(4)]):
        steps.finished(text)
    assert [d for d, _, _ in heard] == list(range(1, 10)) and {t for _, t, _ in heard} == {9}


def test_if_missing_trains_only_when_the_registry_has_no_usable_model(tmp_path, monkeypatch, capsys):
    """The compose stack's one-shot `train` service runs at every start: a usable model is kept."""
    from models import registry

    class Trained(Exception):
        pass

    def train(*_args, **_kwargs):
        raise Trained
    monkeypatch.setattr(training, "train", train)
    monkeypatch.setattr(registry, "latest_version", lambda folder=None: "v-usable")
    assert main(["train", "--quick", "--no-report", "--if-missing", "--registry", str(tmp_path)]) == 0
    assert "v-usable" in capsys.readouterr().out
    monkeypatch.setattr(registry, "latest_version", lambda folder=None: None)   # none, or a stale one
    with pytest.raises(Trained):
        main(["train", "--quick", "--no-report", "--if-missing", "--registry", str(tmp_path)])
    monkeypatch.setattr(registry, "latest_version", lambda folder=None: "v-usable")
    with pytest.raises(Trained):                                                 # without the flag: trains
        main(["train", "--quick", "--no-report", "--registry", str(tmp_path)])
