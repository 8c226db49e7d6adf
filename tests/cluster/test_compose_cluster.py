"""Issue 31: the compose `cluster` profile run for real (``make e2e-compose-cluster``, which builds, brings
the profile up, runs this, and brings it down, also on failure): three KRaft brokers (replication 3, min
ISR 2), a Spark master and two workers, the detector job submitted to the master. A labelled stream goes
through every detector while the broker coordinating the first writer's transactions is SIGKILLed
(``docker kill``) and left down; a read_committed count then finds every alert the static backtest expects
exactly once. Reached from the host through the brokers' published ports (the make target sets FRAUD_*)."""

from __future__ import annotations

import dataclasses
import json
import os
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from common.kafka_io import read_topic
from common.settings import REPO_ROOT, Settings
from common.waiting import wait_until
from demo.diamond import Traffic
from demo.drain import writer_ids
from deploy.processes import ProcessGroup
from tests.cluster.cluster_chaos import transaction_coordinator
from tests.cluster.conftest import say
from tests.e2e.chaos import _json_objects, expected_alert_ids
from tests.e2e.stream import _drain, end_offsets
from tests.e2e.targets import _next_start, container_of, container_state, docker

pytestmark = pytest.mark.timeout(3600)

ARTIFACTS = REPO_ROOT / "artifacts" / "cluster"
# 3,000 labelled transactions at 30/s (~100 s, so the kill lands mid-stream), every scenario; no late events
# or jitter, so the static backtest's alerts are exactly the expected ones (as tests/cluster/cluster_chaos.py).
TRAFFIC = Traffic(seed=11, count=3_000, duration=3_000 / 30, rate=30, customers=2_000, late_fraction=0.0,
                  jitter_seconds=0.0, scenarios=("amount_spike=0.01", "impossible_travel=0.002"))
KILL_AT = 1_000                              # transactions published when the broker is killed
PRODUCER_GRACE_S = 600.0
SERVICES = ("redis", "kafka-1", "kafka-2", "kafka-3", "spark-master", "spark-worker-1", "spark-worker-2",
            "detectors-cluster")


def _running_except(killed: list[str]) -> None:
    stopped = [name for name, state in container_state(*SERVICES).items()
               if name not in killed and state["Status"] in {"exited", "dead"}]
    if stopped:
        raise RuntimeError(f"compose cluster services stopped: {stopped}")


def run_compose_cluster(settings: Settings, out: Path) -> dict:
    from deploy.local_stack import broker_ready

    assert broker_ready(settings), f"the compose cluster's brokers do not answer on {settings.kafka_bootstrap}"
    traffic = dataclasses.replace(TRAFFIC, id_prefix=f"cc{uuid.uuid4().hex[:8]}-", start=_next_start(settings))
    topic = settings.topic_transactions
    first = end_offsets(settings, topic)
    seen = [0]

    def published() -> int:
        """Transactions of this run in the topic so far (the last count while a dead node is in the metadata)."""
        from kafka.errors import KafkaError

        try:
            seen[0] = sum(o - first.get(p, 0) for p, o in end_offsets(settings, topic).items())
        except (KafkaError, OSError):
            pass
        return seen[0]

    labels = out / "labels.jsonl"
    killed: list[str] = []
    figures: dict = {}
    with ProcessGroup(out / "logs") as group:
        started = time.monotonic()
        producer = group.start("producer", traffic.simulate_args(labels), settings.to_env())
        wait_until(lambda: _running_except(killed) or producer.proc.poll() is not None or published() >= KILL_AT,
                   PRODUCER_GRACE_S, f"{KILL_AT} transactions to be published", interval=0.5)
        # The coordinator of the first writer's transactions: its writer must move to another one.
        writer = f"fraud-writer.{settings.topic_alerts}.{writer_ids()[0]}"
        node = wait_until(lambda: transaction_coordinator(settings, writer), 60, "the writer's coordinator")
        victim = f"kafka-{node}"
        figures["killed"] = {"service": victim, "at_s": round(time.monotonic() - started, 1), "published": published()}
        say(f"docker kill {victim} (node {node}, the coordinator of {writer}) after {figures['killed']['published']} "
            "transactions")
        docker("kill", container_of(victim))
        killed.append(victim)
        wait_until(lambda: _running_except(killed) or producer.proc.poll() is not None,
                   traffic.transactions / traffic.rate + PRODUCER_GRACE_S, "the producer to finish", interval=0.5)
        assert producer.proc.returncode == 0, producer.tail()
        drained = time.monotonic()
        figures["drain_error"] = _drain(settings, lambda: _running_except(killed)) or "none"
        figures["drain_s"] = round(time.monotonic() - drained, 1)
    mine = lambda r: str(r.get("card_id", "")).startswith(traffic.id_prefix)  # noqa: E731
    alerts = [a for a in _json_objects(read_topic(settings, settings.topic_alerts, timeout=300)) if mine(a)]
    transactions = [t for t in _json_objects(read_topic(settings, topic, timeout=300)) if mine(t)]
    # ml_score's model is the one the stack trained (the `models` volume), the backtest on local[2].
    docker("cp", f"{container_of('detectors-cluster')}:/var/lib/fraud/models", str(out / "models"))
    env = {**os.environ, **settings.to_env(), "FRAUD_SPARK_MASTER": "local[2]",
           "FRAUD_MODEL_REGISTRY": str(out / "models"), "FRAUD_RUN_DIR": str(out / "backtest-run")}
    expected = expected_alert_ids(transactions, labels, out / "backtest", (), env)
    counts = Counter(a["alert_id"] for a in alerts)
    present = set(counts)
    figures.update({
        "transactions_distinct": len({t["txn_id"] for t in transactions}),
        "alerts_expected": len(expected), "alerts_present": len(present),
        "alerts_missing": len(expected - present), "alerts_unexpected": len(present - expected),
        "alert_duplicates": sum(n - 1 for n in counts.values()),
        "detectors_with_alerts": sorted({a["detector"] for a in alerts}),
    })
    return figures


@pytest.fixture(scope="module")
def compose_cluster(settings, tmp_path_factory):
    if os.environ.get("FRAUD_E2E_TARGET") != "compose-cluster":
        pytest.skip("the compose cluster is brought up by make e2e-compose-cluster (FRAUD_E2E_TARGET=compose-cluster)")
    figures = run_compose_cluster(settings, tmp_path_factory.mktemp("compose-cluster"))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "compose-cluster.json").write_text(json.dumps(figures, indent=2) + "\n")
    say(f"figures: {json.dumps(figures)}")
    return figures


def test_every_expected_alert_arrives_exactly_once_across_a_broker_sigkill(compose_cluster):
    figures = compose_cluster
    assert figures["drain_error"] == "none", figures["drain_error"]
    assert figures["transactions_distinct"] == TRAFFIC.count
    assert figures["alerts_expected"] > 0
    assert (figures["alerts_missing"], figures["alert_duplicates"], figures["alerts_unexpected"]) == (0, 0, 0), figures
    assert figures["killed"]["published"] < TRAFFIC.count, figures["killed"]    # mid-stream
