"""The executors import the project from the shipped code zip and nothing else: a small application
(``tests/cluster/executor_probe.py``) submitted with the detector job's own ``spark-submit`` command to
the standalone master reports, from the executors' Python workers, where ``common`` and ``detectors``
come from, which interpreter runs them, and that a package present only on the driver is not there."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from common.settings import REPO_ROOT
from tests.cluster.conftest import say

pytestmark = pytest.mark.timeout(900)

PROBE = Path(__file__).with_name("executor_probe.py")
JOB = str(REPO_ROOT / "spark_job" / "__main__.py")


def run_probe(settings, replace: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, list[str]]:
    """The probe submitted as ``cluster-submit`` submits the job (``replace``: parts of the command swapped)."""
    from deploy import cluster

    cmd = cluster.submit_command(settings, [])
    cmd[cmd.index(JOB)] = str(PROBE)
    cmd = [(replace or {}).get(part, part) for part in cmd]
    env = {**cluster.spark_env(settings), **cluster.cluster_settings(settings).to_env()}
    say("$ " + " ".join(cmd))
    return subprocess.run(cmd, env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600), cmd


def submit_probe(settings) -> tuple[list[dict], str]:
    """The probe's reports and the command line."""
    result, cmd = run_probe(settings)
    lines = [line for line in result.stdout.splitlines() if line.startswith("EXECUTORS ")]
    assert result.returncode == 0 and lines, f"the probe failed ({result.returncode}):\n{result.stderr[-4000:]}"
    return json.loads(lines[-1].removeprefix("EXECUTORS ")), " ".join(cmd)


@pytest.fixture(scope="module")
def reports(local_cluster):
    found, submitted = submit_probe(local_cluster)
    say("executors report:\n" + json.dumps(found, indent=1))
    return found, submitted


def test_the_executors_run_the_shipped_environment_not_the_drivers_venv(reports):
    found, submitted = reports
    assert "--archives" in submitted and "#environment" in submitted
    for report in found:
        assert Path(report["prefix"]) == Path(report["cwd"]) / "environment", report
        assert Path(report["python"]).parent == Path(report["cwd"]) / "environment" / "bin", report
        # pyspark is the Spark installation's (python/lib/pyspark.zip on the workers), not the env's.
        assert "/pyspark.zip/" in report["pyspark"] or ".jar/" in report["pyspark"], report


def test_the_executors_import_the_project_from_the_shipped_zip_only(reports):
    found, _ = reports
    for report in found:
        shipped = str(Path(report["cwd"]) / "fraud_detection_app.zip")
        assert report["common"].startswith(shipped + "/"), report
        assert report["detectors"].startswith(shipped + "/"), report
        assert report["driver_only_importable"] == [], report


def test_the_python_workers_start_from_the_projects_daemon_module(reports):
    found, _ = reports
    assert all(report["daemon_module_ran"] for report in found), found


def test_without_the_code_zip_on_their_path_the_python_workers_fail_naming_the_daemon_module(reports, local_cluster):
    # The daemon module is imported before any task adds the --py-files: with the zip off the workers'
    # PYTHONPATH the application fails, and says why; nothing falls back to another daemon or interpreter.
    result, _ = run_probe(local_cluster, {"spark.executorEnv.PYTHONPATH=fraud_detection_app.zip":
                                          "spark.executorEnv.PYTHONPATH=not-the-code.zip"})
    assert result.returncode != 0
    assert "EXECUTORS " not in result.stdout
    assert "common.pyspark_daemon" in result.stderr and "No module named 'common'" in result.stderr, \
        result.stderr[-3000:]
