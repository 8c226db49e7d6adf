"""The diamond on the local cluster while a broker, a Spark worker and an enricher worker are SIGKILLed
mid-stream (``tests/cluster/cluster_chaos.py``): the chaos suite's figures, counted the chaos suite's way
with a read_committed reader. The run happens once per module; its table goes to artifacts/cluster/."""

from __future__ import annotations

import json

import pytest

from common.settings import REPO_ROOT
from tests.cluster.conftest import say

pytestmark = pytest.mark.timeout(3600)

ARTIFACTS = REPO_ROOT / "artifacts" / "cluster"


@pytest.fixture(scope="module")
def cluster_chaos(local_cluster, tmp_path_factory):
    from tests.cluster.cluster_chaos import run_cluster_chaos

    result, observed = run_cluster_chaos(local_cluster, tmp_path_factory.mktemp("cluster-chaos"), say)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "chaos.json").write_text(json.dumps({**result.to_json(), "observed": observed}, indent=2) + "\n")
    (ARTIFACTS / "chaos.md").write_text(result.table() + "\n")
    say(f"figures ({ARTIFACTS}):\n{result.table()}\nobserved: {json.dumps(observed, indent=1)}")
    return result, observed


def test_the_job_ran_on_the_standalone_master_with_executors_on_both_workers(cluster_chaos):
    _, observed = cluster_chaos
    assert "--master spark://127.0.0.1:" in observed["submitted"] and "--py-files" in observed["submitted"]
    assert "local[" not in observed["submitted"]
    assert observed["executors_at_start"] == 2         # one on each worker
    assert observed["replicas_before"] == [(3, 3)]     # every partition on three brokers, all in sync


def test_no_alert_is_lost_duplicated_or_invented(cluster_chaos):
    result, _ = cluster_chaos
    figures = result.figures
    assert figures["drain_error"] == "none", figures["drain_error"]
    assert figures["transactions_distinct"] == 6_000
    assert figures["alerts_expected"] > 0
    assert (figures["alerts_missing"], figures["alert_duplicates"], figures["alerts_unexpected"]) == (0, 0, 0), figures


def test_every_alert_is_enriched_once_and_in_exactly_one_case(cluster_chaos):
    figures = cluster_chaos[0].figures
    assert (figures["enriched_missing"], figures["alerts_not_in_a_case"], figures["alerts_in_two_cases"]) == (0, 0, 0), \
        figures
    assert figures["enriched_alerts"] == figures["alerts_present"]


def test_every_broken_record_is_dead_lettered_with_its_reason_and_nothing_else(cluster_chaos):
    figures = cluster_chaos[0].figures
    assert figures["garbage_sent"] >= 1_000
    assert (figures["garbage_not_dead_lettered"], figures["garbage_with_another_reason"],
            figures["dead_letters_not_garbage"]) == (0, 0, 0), figures


def test_each_failure_happened_as_meant_and_everything_recovered(cluster_chaos):
    result, observed = cluster_chaos
    assert [f.fault for f in result.faults] == ["garbage", "kafka_broker", "spark_worker", "enricher_worker"]
    assert [(f.fault, f.note) for f in result.faults if f.recovery_s is None] == []
    assert result.unexpected_deaths == []
    broker = observed["kafka_broker"]
    assert broker["partitions_led"] > 0 and broker["led_by_victim_after"] == 0, broker
    assert observed["spark_worker"]["executors_lost"] >= 1, observed
    assert observed["spark_worker"]["app_cores_after_restart"] == 2, observed   # a new executor on the restarted worker
    enricher = observed["enricher_worker"]        # the killed member leaves once its session times out
    assert (enricher["members_before"], enricher["members_after"]) == (2, 1), observed
