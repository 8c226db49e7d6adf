"""`make demo` end to end, shortened: the whole diamond on the local stack, then the report is checked."""

from __future__ import annotations

import json
import subprocess
import sys

from common.settings import REPO_ROOT

# Recall each built-in detector must reach on its own scenarios in a short demo. Lower than the
# backtest's 0.95: late events (0.5% by default) fall behind the watermark in streaming.
MIN_RECALL = 0.8
MIN_PRECISION = 0.8


def test_a_short_demo_detects_every_scenario_once_and_leaves_no_process_behind(stack, tmp_path):
    result = subprocess.run([sys.executable, "-m", "deploy.demo", "--duration", "20", "--rate", "1000",
                             "--out", str(tmp_path), "--no-live", "--drain-timeout", "480"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "all processes stopped" in result.stdout

    report = json.loads((tmp_path / "report.json").read_text())
    assert report["transactions"] > 10_000
    assert report["duplicate_alert_ids"] == 0
    for name, quality in report["quality"]["detectors"].items():
        if quality.get("recall") is None:      # a detector with no scenario in the simulator
            continue
        assert quality["recall"] >= MIN_RECALL, (name, quality)
        assert quality["precision"] is not None and quality["precision"] >= MIN_PRECISION, (name, quality)
    assert (tmp_path / "report.md").exists() and (tmp_path / "latency.png").exists()
    assert report["latency_s"]["p50"] is not None
