"""The demo's quick model exactly as ``make demo`` trains it when none is registered (``demo.diamond.
TRAIN_QUICK``: the full world, one fold, one candidate), as a process without a terminal: a line per
step, a model ml_score loads. About 30 s on the 2 shared cores (the full protocol: ~4 minutes)."""

from __future__ import annotations

import subprocess
import sys
import time

from common.settings import REPO_ROOT
from demo.diamond import TRAIN_QUICK, is_training_progress
from models import features as fx


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
