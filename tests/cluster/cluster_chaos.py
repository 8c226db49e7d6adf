"""The chaos suite's run on the local cluster (``deploy/cluster.py``): the detector job submitted to the
Spark standalone master with ``python -m deploy cluster-submit``, two enricher workers in one consumer
group, every topic on three brokers; mid-stream one broker, one Spark worker and one enricher worker are
SIGKILLed. Counting is the chaos suite's own (``tests/e2e/chaos.py``, ``ChaosRun._count``).

- ``kafka_broker``: the transaction coordinator of the rule detectors' exactly-once writer (which also
  leads some partitions of the transactions and alerts topics) is SIGKILLed and stays down (two replicas of three are in sync: ``min.insync.replicas=2`` still accepts writes);
  recovered once the metadata shows every one of those partitions led elsewhere, every detector query
  committed a micro-batch and a probe alert came out of the enricher and the case manager.
- ``spark_worker``: a worker's process group (the worker JVM, its executor and the executor's Python
  workers) is SIGKILLed, a machine lost; the driver reruns the lost tasks on the other executor.
  Recovered once every query committed again; the worker is then started again and the master gives
  the application a new executor on it.
- ``enricher_worker``: the second enricher worker is SIGKILLed and stays down; the group rebalances its
  partitions to the first. Recovered once a probe alert is enriched and cased.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from common.kafka_admin import admin_client
from common.settings import Settings
from common.waiting import wait_until
from deploy import cluster
from demo.diamond import SERVICE_START_TIMEOUT, STANDBY, LocalDiamond, Traffic
from demo.drain import MarkerCounter
from tests.e2e.chaos import ChaosPlan, ChaosResult, ChaosRun, Say, _every_writer_committed

LEADERS_MOVE_TIMEOUT_S = 120.0   # the controller fences a silent broker after broker.session.timeout.ms (9 s)
ENRICHERS = ("enricher", "enricher-2")

# 6,000 labelled transactions at 25/s: the stream lasts ~4 minutes, so the faults land inside it (a broker's
# death can cost the detector job over 2 minutes: its transaction coordinator moves, see docs/cluster.md). Every
# detector, ml_score too; no late events or jitter, so the static backtest's alerts are exactly the expected.
PLAN = ChaosPlan("cluster", Traffic(seed=11, count=6_000, duration=6_000 / 25, rate=25, customers=3_000,
                                    late_fraction=0.0, jitter_seconds=0.0,
                                    scenarios=("amount_spike=0.01", "impossible_travel=0.002")),
                 ("garbage", "kafka_broker", "spark_worker", "enricher_worker"), garbage=2_000)


def partition_leaders(settings: Settings, topics: list[str]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the node leading it (-1: none), from a fresh metadata request; {} when the
    request failed (sent to the node just killed, before the client's metadata knows it is gone)."""
    from kafka.errors import KafkaError

    try:
        with admin_client(settings, request_timeout_ms=10000) as admin:
            described = admin.describe_topics(topics)
    except (KafkaError, OSError):
        return {}
    return {(t.get("topic") or t.get("name"), p["partition_index"]): p["leader_id"]
            for t in described for p in t["partitions"]}


def led_elsewhere(settings: Settings, topics: list[str], victim: int) -> dict[tuple[str, int], int] | None:
    """The leaders once no partition of ``topics`` is led by ``victim`` or leaderless, else None."""
    leaders = partition_leaders(settings, topics)
    return leaders if leaders and not {victim, -1} & set(leaders.values()) else None


def replicas(settings: Settings, topics: list[str]) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (replicas, in-sync replicas)."""
    with admin_client(settings, request_timeout_ms=10000) as admin:
        described = admin.describe_topics(topics)
    return {(t.get("topic") or t.get("name"), p["partition_index"]): (len(p["replica_nodes"]), len(p["isr_nodes"]))
            for t in described for p in t["partitions"]}


def group_members(settings: Settings, group_id: str) -> int:
    """Members of a consumer group (asked again while a request fails on a node that died)."""
    from kafka.errors import KafkaError

    def members() -> int | None:
        try:
            with admin_client(settings, request_timeout_ms=10000) as admin:
                return len(admin.describe_groups([group_id])[group_id]["members"])
        except (KafkaError, OSError):
            return None
    found: list[int] = []
    wait_until(lambda: found.append(members()) or found[-1] is not None, 60, f"the members of {group_id}",
               interval=1)
    return found[-1]


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (what Kafka hashes a transactional id with), as a signed 32-bit int."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):              # Java hashes UTF-16 code units
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def transaction_coordinator(settings: Settings, transactional_id: str) -> int | None:
    """The node coordinating ``transactional_id``: the leader of its ``__transaction_state`` partition
    (``Utils.abs(id.hashCode()) % partitions``, Kafka's TransactionStateManager)."""
    leaders = partition_leaders(settings, ["__transaction_state"])
    if not leaders:
        return None
    return leaders.get(("__transaction_state", (java_string_hash(transactional_id) & 0x7FFFFFFF) % len(leaders)))


class ClusterDiamond(LocalDiamond):
    """The diamond on the cluster: the cluster (Redis included) is already up; the detector job is
    submitted to its master, and two enricher workers share the enricher's consumer group."""

    def __init__(self, cluster_base: Settings, *args, **kwargs):
        super().__init__(cluster.cluster_settings(cluster_base), *args, **kwargs)
        self.cluster = cluster_base
        self.services = ("detectors", *ENRICHERS, "cases", "dashboard", *((STANDBY,) if STANDBY in self.services else ()))
        # Metrics endpoints are not what this run tests, and two enrichers on one host would share a port.
        self.env = {**cluster.cluster_settings(self.settings).to_env(), "FRAUD_METRICS_ENABLED": "false"}

    def start_stack(self) -> None:
        self.say(f"cluster: brokers {self.base.kafka_bootstrap}, master {self.base.spark_master}")

    def start_services(self) -> None:
        submit = ["-m", "deploy", "cluster-submit", "--", *self.detectors]
        leader = self.group.start("detectors", submit, self.env)
        if STANDBY in self.services:
            # A standalone master gives its cores to the application registered first: a standby started
            # with the leader may hold them all while the leader waits (docs/deployment.md).
            wait_until(lambda: self.check_services() or " spark_job: running " in leader.output(),
                       SERVICE_START_TIMEOUT, "the leading detector job to run its queries", interval=0.5)
            self.group.start(STANDBY, submit, self.env)
        for name in ENRICHERS:
            self.group.start(name, ["-m", "sinks.enricher", "worker", "--without-web", "-l", "warn"], self.env)
        self.group.start("cases", ["-m", "sinks.cases", "worker", "--without-web", "-l", "warn"], self.env)
        self.group.start("dashboard", ["-m", "sinks.dashboard"], self.env)


class ClusterChaosRun(ChaosRun):
    def __init__(self, plan: ChaosPlan, diamond: ClusterDiamond, out: Path, say: Say):
        super().__init__(plan, diamond, out, say)
        self.cluster = diamond.cluster
        self.observed: dict = {}

    def backtest_env(self) -> dict[str, str]:
        # The expected alerts are computed apart from the system under test, on local[2].
        return {**self.diamond.env, "FRAUD_SPARK_MASTER": "local[2]"}

    def _fault_kafka_broker(self) -> None:
        at, published = self._elapsed(), self._published()
        topics = [self.settings.topic_transactions, self.settings.topic_alerts]
        before: dict = {}
        wait_until(lambda: before.update(partition_leaders(self.settings, topics)) or before, 60,
                   "the partition leaders", interval=1)
        # The transaction coordinator of the rule detectors' writer (so the writer's coordinator moves too),
        # which leads some of the transactions and alerts partitions as well.
        writer = f"fraud-writer.{self.settings.topic_alerts}.{self.diamond.writer_ids()[0]}"
        victim = wait_until(lambda: transaction_coordinator(self.settings, writer), 60, "the writer's coordinator")
        if victim not in before.values():
            victim = Counter(before.values()).most_common(1)[0][0]
        coordinated = victim == transaction_coordinator(self.settings, writer)
        led = sorted(tp for tp, leader in before.items() if leader == victim)
        killed = time.monotonic()
        cluster.ClusterBroker(self.cluster, victim).kill()
        moved_in, after = None, {}
        try:
            after = wait_until(lambda: led_elsewhere(self.settings, topics, victim), LEADERS_MOVE_TIMEOUT_S,
                               f"the partitions node {victim} led to get other leaders", interval=0.5)
            moved_in = time.monotonic() - killed
        except TimeoutError:
            after = partition_leaders(self.settings, topics)
        markers = MarkerCounter(self.settings, self.diamond.writer_ids())
        recovery = self._until(lambda: _every_writer_committed(markers),
                               "every detector query to commit after the broker died", probe=self._probe_transaction)
        markers.close()
        downstream = self._probe_alert_through(("enriched", "cases"))
        recovery = None if recovery is None or downstream is None or moved_in is None else time.monotonic() - killed
        self.observed["kafka_broker"] = {"node": victim, "partitions_led": len(led), "leaders_moved_s": moved_in,
                                         "was_the_writers_transaction_coordinator": coordinated,
                                         "led_by_victim_after": sum(1 for tp in led if after.get(tp) == victim)}
        self._record("kafka_broker", f"SIGKILL node {victim} (led {len(led)} of {len(before)} partitions"
                     f"{', the writer transaction coordinator' if coordinated else ''}), left down",
                     at, published, 0.0, recovery,
                     f"leaders moved in {moved_in:.1f} s" if moved_in is not None else "leaders did not move")

    def _fault_spark_worker(self) -> None:
        at, published = self._elapsed(), self._published()
        worker = cluster.spark_workers(self.cluster)[0]
        driver_log = self.diamond.group.children["detectors"].log_path
        lost_before = _count_lines(driver_log, "Lost executor")
        killed = time.monotonic()
        worker.kill()
        markers = MarkerCounter(self.settings, self.diamond.writer_ids())
        recovery = self._until(lambda: _every_writer_committed(markers),
                               "every detector query to commit after a Spark worker died", probe=self._probe_transaction)
        markers.close()
        lost = _count_lines(driver_log, "Lost executor") - lost_before
        # Back to two workers: the master gives the application a new executor on the restarted one.
        worker.launch()
        cores = None
        try:
            cores = wait_until(lambda: app_cores(self.cluster) >= 2 and app_cores(self.cluster), 180,
                               "the application to get an executor on the restarted worker", interval=1)
        except TimeoutError:
            pass
        self.observed["spark_worker"] = {"worker": worker.name, "executors_lost": lost, "app_cores_after_restart": cores}
        self._record("spark_worker", f"SIGKILL {worker.name}'s process group (worker, executor), then start it",
                     at, published, 0.0, recovery, f"driver lost {lost} executor(s)")

    def _fault_enricher_worker(self) -> None:
        at, published = self._elapsed(), self._published()
        members_before = group_members(self.settings, self.settings.enricher_app_id)
        self.diamond.retired.add("enricher-2")          # killed for good: not a death to restart
        killed = time.monotonic()
        self.diamond.group.kill("enricher-2")
        recovered = self._probe_alert_through(("enriched", "cases"))
        # The dead member stays in the group until its session times out (sinks.faust_support: 10 s), and
        # the rebalance that follows gives its partitions to the survivor: a probe routed to the survivor
        # can come through before that, so the group is watched until it has shrunk, at most a minute.
        try:
            def shrunk() -> int | None:
                members = group_members(self.settings, self.settings.enricher_app_id)
                return members if members is not None and 0 < members < members_before else None

            members_after = wait_until(shrunk, 60, "the killed worker to leave the enricher's group", interval=0.5)
        except TimeoutError:
            members_after = group_members(self.settings, self.settings.enricher_app_id)
        self.observed["enricher_worker"] = {"members_before": members_before, "members_after": members_after,
                                            "left_after_s": round(time.monotonic() - killed, 1)}
        self._record("enricher_worker", "SIGKILL the second enricher worker, left down", at, published, 0.0,
                     None if recovered is None else time.monotonic() - killed,
                     f"group members {members_before} -> {members_after}")


def app_cores(settings: Settings) -> int:
    """Cores the master has given the running application (its executors')."""
    return sum(app.get("cores", 0) for app in cluster.master_state(settings).get("activeapps", []))


def _count_lines(path: Path, text: str) -> int:
    try:
        return sum(1 for line in path.read_text(errors="replace").splitlines() if text in line)
    except FileNotFoundError:
        return 0


def run_cluster_chaos(base: Settings, out: Path, say: Say) -> tuple[ChaosResult, dict]:
    """The run on the (running) cluster of ``base``; topics stay (the cluster is wiped by its fixture)."""
    from tests.e2e.targets import _with_a_model

    settings = _with_a_model(base.replace(run_dir=out / "run"), out, say)
    plan = dataclasses.replace(PLAN, traffic=dataclasses.replace(PLAN.traffic, id_prefix=f"cl{uuid.uuid4().hex[:8]}-"))
    run_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    clustered = cluster.cluster_settings(settings)
    say(f"cluster chaos: {plan.traffic.transactions:,} transactions, faults {', '.join(plan.faults)}")
    with ClusterDiamond(settings, run_id, plan.traffic, say, prefix="cluster", keep_topics=True) as diamond:
        topics = [diamond.settings.topic_transactions, diamond.settings.topic_alerts]
        layout = replicas(clustered.replace(topic_transactions=topics[0]), topics)
        run = ClusterChaosRun(plan, diamond, out, say)
        result = run.run()
        observed = {**run.observed, "replicas_before": sorted(set(layout.values())),
                    "executors_at_start": _count_lines(diamond.group.children["detectors"].log_path, "Granted executor ID"),
                    "submitted": next((line for line in diamond.group.children["detectors"].log_path.read_text(
                        errors="replace").splitlines() if line.startswith("$ ")), "")}
    return result, observed
