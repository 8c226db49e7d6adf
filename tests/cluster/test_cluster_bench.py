"""The pipeline benchmark on the standalone cluster beside local[2], in one run on the same data
(``python -m bench.cluster``): both sides read every transaction and find the same alerts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.settings import REPO_ROOT
from tests.cluster.conftest import say

pytestmark = pytest.mark.timeout(2400)


def test_the_pipeline_runs_unchanged_on_the_standalone_master_beside_local(local_cluster):
    from bench.cluster import DEFAULT_VARIANTS

    say("$ python -m bench.cluster --count 20000")
    result = subprocess.run([sys.executable, "-m", "bench.cluster", "--count", "20000"], cwd=REPO_ROOT,
                            env={**os.environ, **local_cluster.to_env()}, capture_output=True, text=True,
                            timeout=2000)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    say(result.stdout[-2500:])
    out_dir = Path(result.stdout.strip().splitlines()[-1].split("written to ", 1)[1]).parent
    results = json.loads((out_dir / "cluster.json").read_text())
    for side in ("local[2]", "standalone"):
        runs = results["sides"][side]
        assert set(runs) == set(DEFAULT_VARIANTS), runs
        for name, run in runs.items():
            assert run["rows"] > 0 and run["tx_per_second"], (side, name, run)
    for name in DEFAULT_VARIANTS:
        local, standalone = results["sides"]["local[2]"][name], results["sides"]["standalone"][name]
        if not (local["capped"] or standalone["capped"]):     # both read everything: the same alerts
            assert local["alerts"]["distinct_alert_ids"] == standalone["alerts"]["distinct_alert_ids"], (name, results)
