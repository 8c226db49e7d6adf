"""``python -m models train --quick``: the demo's model when none is registered (one fold, one candidate)
is a real model ml_score loads; the command shows a line per step without a terminal, a bar with one."""

from __future__ import annotations

import io

import pytest

from common.cli_errors import UserError
from models import features as fx, registry, training
from models.__main__ import main
from models.progress import terminal_progress


def test_the_quick_preset_registers_a_model_ml_score_loads(tmp_path, capsys):
    # the quick preset on a small world (150 customers, 300 terminals) to keep it to seconds; the demo's
    # run uses the full world (~30 s: tests/integration/test_models_quick_cli.py)
    assert main(["train", "--quick", "--customers", "150", "--terminals", "300", "--registry", str(tmp_path),
                 "--no-report"]) == 0
    lines = capsys.readouterr().out.splitlines()
    steps = [line for line in lines if line.startswith("[")]
    assert steps[0] == "[0/4] simulating 72 days (handbook profile, seed 1)"
    assert [s.split("] ")[0] for s in steps if " fold 1/1 " in s] == ["[3/4", "[4/4"]
    assert "hist_gradient_boosting: validation fold 1/1" in steps[3] and "test fold 1/1" in steps[4]
    assert lines[-1].startswith("registered handbook-hist_gradient_boosting-quick as ")

    from detectors import ml_score

    detector = ml_score.bind("latest", tmp_path)       # what the ML detector does with the registry
    artifact = detector.params.artifact
    assert artifact.features == list(fx.FEATURES) and artifact.name.endswith("-quick")
    meta = artifact.meta
    assert meta["preset"] == "quick" and meta["protocol"]["folds"] == training.QUICK_FOLDS == 1
    assert set(meta["metrics"]) == set(training.QUICK_MODELS) and meta["data"]["days"] == 72
    assert 0 < artifact.threshold < 1 and artifact.terminal_table is not None
    import pandas as pd
    from models import scoring

    rows = pd.DataFrame([artifact.baseline, {**artifact.baseline, "terminal_risk_7d": 1.0, "amount": 900.0}])
    scores = scoring.predict(artifact.estimator, scoring.matrix(rows, artifact.features))
    assert scores.shape == (2,) and ((0 <= scores) & (scores <= 1)).all()
    assert registry.latest_version(tmp_path) == artifact.version


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
