"""The exactly-once writer's guard against a committed transaction without its records
(``UndeliveredRecordsError``) fires on the cluster, and the count stays exactly once
(``tests/cluster/undelivered.py``: an alerts partition leader SIGSTOPped, the delivery timeout short)."""

from __future__ import annotations

import json

import pytest

from tests.cluster.conftest import say

pytestmark = pytest.mark.timeout(2400)


@pytest.fixture(scope="module")
def undelivered(local_cluster, tmp_path_factory):
    from tests.cluster.undelivered import run_undelivered

    result, observed = run_undelivered(local_cluster, tmp_path_factory.mktemp("cluster-undelivered"), say)
    say(f"figures:\n{result.table()}\nobserved: {json.dumps(observed, indent=1)}")
    return result, observed


def test_the_writers_guard_fired_and_the_query_recovered(undelivered):
    result, observed = undelivered
    stopped = observed["alerts_leader_stopped"]
    assert stopped["alerts_partitions_led"] > 0 and stopped["node"] != stopped["coordinator"], stopped
    assert stopped["guard_fired"] >= 1 and "were not delivered" in stopped["first_guard_line"], stopped
    assert [(f.fault, f.note) for f in result.faults if f.recovery_s is None] == []
    assert result.unexpected_deaths == []


def test_every_expected_alert_is_there_exactly_once(undelivered):
    figures = undelivered[0].figures
    assert figures["drain_error"] == "none", figures["drain_error"]
    assert figures["alerts_expected"] > 0
    assert (figures["alerts_missing"], figures["alert_duplicates"], figures["alerts_unexpected"]) == (0, 0, 0), figures
    assert (figures["enriched_missing"], figures["alerts_not_in_a_case"], figures["alerts_in_two_cases"]) == (0, 0, 0), \
        figures
