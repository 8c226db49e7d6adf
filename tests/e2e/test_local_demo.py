"""What only the local target has: the run is ``make demo``'s own (demo.diamond), so its report is
written and every process it started is stopped at the end. Skipped on the compose target."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.timeout(1500)   # the first test may also run the diamond


def test_the_demo_report_is_written(local_run):
    out = local_run.local["out"]
    report = json.loads((out / "report.json").read_text())
    assert report["transactions"] > 10_000
    assert report["duplicate_alert_ids"] == 0
    assert report["dead_letters"] == len(local_run.bad_records)
    assert report["latency_s"]["p50"] is not None
    assert set(report["quality"]["detectors"]) >= {a["detector"] for a in local_run.alerts}
    for name in ("report.md", "latency.png", "alerts.png", "alerts.jsonl"):
        assert (out / name).stat().st_size > 0, name


def test_every_process_the_run_started_is_stopped(local_run):
    assert local_run.local["leftovers"] == []
    assert "all processes stopped" in local_run.local["messages"]



def test_the_detector_job_stops_without_a_traceback(local_run):
    """The demo stops the job's process group: the JVM's shutdown hook may stop the session first, and the
    connections it closes are not errors of the job (spark_job/job.py)."""
    log = (local_run.local["log_dir"] / "detectors.log").read_text()
    assert "Traceback" not in log, log[max(0, log.find("Traceback") - 1500):][:4000]
