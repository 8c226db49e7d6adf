"""The demo's quick model exactly as ``make demo`` trains it when none is registered (``demo.diamond.
TRAIN_QUICK``: the full world, one fold, one candidate), as a process without a terminal: a line per
step, a model ml_score loads. About 30 s on the 2 shared cores (the full protocol: ~4 minutes)."""

from __future__ import annotations

import subprocess
import sys
import time

from common.settings import REPO_ROOT
from demo.diamond import TRAIN_QUICK, is_training_progress
import pandas as pd

from models import features as fx, registry, scoring, training


def test_the_demos_quick_training_registers_a_loadable_model_step_by_step(tmp_path):
    started = time.monotonic()
    result = subprocess.run([sys.executable, *TRAIN_QUICK, "--registry", str(tmp_path)], cwd=REPO_ROOT,
                            capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stderr[-2000:]
    shown = [line for line in result.stdout.splitlines() if is_training_progress(line)]
    print(f"quick training: {seconds:.1f} s\n" + "\n".join(shown))
    assert [line.split("] ")[0] for line in shown[:5]] == ["[0/4", "[1/4", "[2/4", "[3/4", "[4/4"]
    assert shown[-1].startswith("registered handbook-hist_gradient_boosting-quick as ")

    from detectors import ml_score

    artifact = ml_score.bind("latest", tmp_path).params.artifact
    assert artifact.features == list(fx.FEATURES) and artifact.meta["data"]["customers"] is None  # full world
    assert artifact.meta["metrics"]["hist_gradient_boosting"]["test"]["auc_roc"] > 0.8
    meta = artifact.meta
    assert meta["preset"] == "quick" and meta["protocol"]["folds"] == training.QUICK_FOLDS == 1
    assert set(meta["metrics"]) == set(training.QUICK_MODELS) and meta["data"]["days"] == 72
    assert 0 < artifact.threshold < 1 and artifact.terminal_table is not None and artifact.name.endswith("-quick")
    rows = pd.DataFrame([artifact.baseline, {**artifact.baseline, "terminal_risk_7d": 1.0, "amount": 900.0}])
    scores = scoring.predict(artifact.estimator, scoring.matrix(rows, artifact.features))
    assert scores.shape == (2,) and ((0 <= scores) & (scores <= 1)).all()
    assert registry.latest_version(tmp_path) == artifact.version
