"""Two detector jobs submitted to the cluster against one checkpoint root, the lease in Kafka
(``FRAUD_LEADER_LEASE=kafka``, spark_job.leadership.KafkaLease, what a root on HDFS or S3 gets): one leads,
the other stands by; the leader's driver is SIGKILLed twice, the standby takes over each time and the
killed one comes back as the next standby; every alert once, counted the chaos suite's way."""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import datetime, timezone

import pytest

from demo.diamond import Traffic
from tests.cluster.conftest import say
from tests.e2e.chaos import ChaosPlan

pytestmark = pytest.mark.timeout(2400)

RULES = ("double_swipe", "velocity", "amount_anomaly", "impossible_travel")
PLAN = ChaosPlan("cluster-lease", Traffic(seed=17, count=6_000, duration=6_000 / 25, rate=25, customers=3_000,
                                          late_fraction=0.0, jitter_seconds=0.0,
                                          scenarios=("amount_spike=0.02", "impossible_travel=0.004")),
                 ("detectors", "detectors"), detectors=RULES, standby=True)


@pytest.fixture(scope="module")
def lease_run(local_cluster, tmp_path_factory):
    from tests.cluster.cluster_chaos import ClusterChaosRun, ClusterDiamond

    out = tmp_path_factory.mktemp("cluster-lease")
    settings = local_cluster.replace(run_dir=out / "run", leader_lease="kafka")
    plan = dataclasses.replace(PLAN, traffic=dataclasses.replace(PLAN.traffic, id_prefix=f"ls{uuid.uuid4().hex[:8]}-"))
    run_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    say(f"lease: {plan.traffic.transactions:,} transactions, two detector jobs, the lease in Kafka, the leader killed twice")
    with ClusterDiamond(settings, run_id, plan.traffic, say, prefix="lease", keep_topics=True,
                        detectors=plan.detectors, standby=True) as diamond:
        result = ClusterChaosRun(plan, diamond, out, say).run()
        logs = {name: diamond.group.children[name].log_path.read_text(errors="replace")
                for name in ("detectors", "detectors-standby")}
    say(f"figures:\n{result.table()}")
    return result, logs


def test_one_job_led_the_other_stood_by_on_the_kafka_lease_and_took_over_at_each_kill(lease_run):
    result, logs = lease_run
    assert [f.fault for f in result.faults] == ["detectors", "detectors"]
    assert [(f.fault, f.note) for f in result.faults if f.recovery_s is None] == []
    assert [f.leaders[0] != f.leaders[1] for f in result.faults] == [True, True], [f.leaders for f in result.faults]
    both = "\n".join(logs.values())
    assert "standing by: another member of group fraud-leader." in both
    assert both.count("leading: took over from another member of group fraud-leader.") >= 2
    assert "leader.lock" not in both
    assert result.unexpected_deaths == []


def test_every_expected_alert_is_there_exactly_once(lease_run):
    figures = lease_run[0].figures
    assert figures["drain_error"] == "none", figures["drain_error"]
    assert figures["alerts_expected"] > 0
    assert (figures["alerts_missing"], figures["alert_duplicates"], figures["alerts_unexpected"]) == (0, 0, 0), \
        json.dumps(figures)
