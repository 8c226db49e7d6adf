"""The containers' health probes (deploy/docker-compose.yml): the detector job's (every query reported
progress since the job started) and the Faust workers' (this host consumes in its group)."""

from __future__ import annotations

import os
import time

import pytest

from sinks.health import consuming, group_of
from spark_job.health import planned_queries, process_start_time, silent_queries

pytestmark = pytest.mark.unit


def test_a_process_start_time_is_read_from_proc():
    started = process_start_time(os.getpid())
    assert started <= time.time() + 1
    assert started >= process_start_time(1) - 1          # nothing here started before init


def test_queries_are_silent_until_their_progress_is_newer_than_the_job(tmp_path):
    queries = ["detectors-rules", "detectors-ml"]
    (tmp_path / "detectors-rules.json").write_text("{}")
    os.utime(tmp_path / "detectors-rules.json", (1000, 1000))          # a previous run's file
    assert silent_queries(tmp_path, queries, since=2000) == queries
    (tmp_path / "detectors-rules.json").write_text("{}")               # reported after the start
    assert silent_queries(tmp_path, queries, since=2000) == ["detectors-ml"]
    (tmp_path / "detectors-ml.json").write_text("{}")
    assert silent_queries(tmp_path, queries, since=2000) == []


def test_the_planned_queries_are_those_of_detectors_run():
    from demo.drain import writer_ids

    assert planned_queries([]) == writer_ids()
    assert planned_queries(["velocity"]) == writer_ids(["velocity"])


def test_a_worker_is_healthy_only_as_a_member_of_a_stable_group():
    from common.settings import Settings

    assert group_of("cases", Settings()) == Settings().cases_app_id
    members = [{"client_host": "/172.18.0.7"}, {"client_host": "/172.18.0.9"}]
    assert consuming({"group_id": "g", "group_state": "Stable", "members": members}, {"172.18.0.7"}) is None
    assert "not Stable" in consuming({"group_id": "g", "group_state": "PreparingRebalance",
                                      "members": members}, {"172.18.0.7"})
    assert "not among the members" in consuming({"group_id": "g", "group_state": "Stable",
                                                 "members": members}, {"172.18.0.8"})
    assert "not Stable" in consuming({"group_id": "g", "group_state": "Empty", "members": []}, {"172.18.0.7"})
