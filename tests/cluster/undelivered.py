"""A run on the local cluster that makes the exactly-once writer's records undeliverable, so its guard
(``UndeliveredRecordsError``, ``spark_job/alert_writer.py`` ``write_batch``) must fire: the Kafka node
leading some of the ``alerts`` partitions (not the writer's transaction coordinator) is SIGSTOPped while
the writer's delivery timeout is short (``FRAUD_WRITER_DELIVERY_TIMEOUT_MS``) and while the rule query runs
a batch that must alert into a partition that node leads. The producer sends to the frozen leader until
its records expire, before the controller has moved the leadership; kafka-python fails them without
making the transaction abortable. The guard aborts the transaction instead of committing the batch
without them; the query restarts from its checkpoint and the batch is re-run. The node is resumed
(SIGCONT) once the guard has fired. Counted the chaos suite's way.

Why a probe, and why then (``_stop_during_probe_batch``): every partition has the frozen node in its
in-sync replicas until the controller fences it (~9 s), so no new transaction is acknowledged in those
seconds; a batch planned after the stop waits for the frozen node's offsets, and one that reads a
partition the node leads waits for its fetch (30 s, then the new leader). Only a batch already planned,
reading only partitions others lead, with an alert in it, writes while the node is frozen. So the
simulator is paused (SIGSTOP) until the rule query has read all it published, a double-swipe pair goes
to a transactions partition another node leads, its card hashing to an alerts partition the victim
leads, and the node is stopped the moment the query's checkpoint shows the batch that holds the pair
planned and not committed. The simulator goes on once the node is resumed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

from common.contracts import format_event_time
from common.kafka_io import json_bytes, make_producer
from common.settings import Settings, checkpoint_location, local_folder
from common.waiting import wait_until
from demo.diamond import Traffic
from demo.drain import MarkerCounter, latest_event_time
from deploy import cluster
from producers.publish import partition_for
from spark_job.alert_writer import batch_end_offsets, checkpoint_batches
from tests.cluster.cluster_chaos import (ClusterChaosRun, ClusterDiamond, _count_lines, partition_leaders,
                                        transaction_coordinator)
from tests.e2e.chaos import ChaosPlan, ChaosResult, Say, _every_writer_committed
from tests.e2e.stream import end_offsets

GUARD_LINE = "alert_writer: UndeliveredRecordsError"    # the writer's one log line when its guard fires
GUARD_TIMEOUT_S = 120.0
PROBE_ATTEMPTS = 5      # pairs sent before giving up on stopping the node while one's batch runs
PROBE_PREFIX = "undelivered-probe-"   # not the run's id prefix: the probes' alerts are not counted
# Short enough that records sent to the frozen leader expire before the controller fences it
# (broker.session.timeout.ms, 9 s) and the producer learns the new leader; kafka-python wants it at
# least linger (20 ms) + the request timeout, which the writer derives from it.
DELIVERY_TIMEOUT_MS = 3000
RULES = ("double_swipe", "velocity", "amount_anomaly", "impossible_travel")   # one query, one writer

PLAN = ChaosPlan("cluster-undelivered", Traffic(seed=13, count=3_000, duration=3_000 / 25, rate=25, customers=1_500,
                                                late_fraction=0.0, jitter_seconds=0.0,
                                                scenarios=("amount_spike=0.02", "impossible_travel=0.004")),
                 ("alerts_leader_stopped",), detectors=RULES)


class UndeliveredRun(ClusterChaosRun):
    def _fault_alerts_leader_stopped(self) -> None:
        at, published = self._elapsed(), self._published()
        topic = self.settings.topic_alerts
        writer = self.diamond.writer_ids()[0]
        leaders: dict = {}
        topics = [topic, self.settings.topic_transactions]
        wait_until(lambda: leaders.update(partition_leaders(self.settings, topics)) or leaders, 60,
                   "the alerts and transactions partitions' leaders", interval=1)
        coordinator = wait_until(lambda: transaction_coordinator(self.settings, f"fraud-writer.{topic}.{writer}"),
                                 60, "the writer's coordinator")
        # A leader of alerts partitions that is not the coordinator: with the coordinator frozen, the
        # transaction itself would hang (another failure, the cluster chaos run's kafka_broker).
        led = Counter(leader for (t, _), leader in leaders.items() if t == topic and leader != coordinator)
        victim = led.most_common(1)[0][0]
        node = cluster.ClusterBroker(self.cluster, victim)
        pid = node.pid()
        log = self.diamond.group.children["detectors"].log_path
        fired_before = _count_lines(log, GUARD_LINE)
        simulator = self.diamond.group.children["producer"].proc.pid
        os.kill(simulator, signal.SIGSTOP)
        fired_in = None
        try:
            stopped, attempts = self._stop_during_probe_batch(pid, victim, leaders, writer)
            try:
                wait_until(lambda: self._check() or _count_lines(log, GUARD_LINE) > fired_before, GUARD_TIMEOUT_S,
                           "the writer's guard to fire", interval=0.5)
                fired_in = time.monotonic() - stopped
            except TimeoutError:
                pass
            finally:
                os.kill(pid, signal.SIGCONT)
        finally:
            os.kill(simulator, signal.SIGCONT)
        resumed = time.monotonic()
        markers = MarkerCounter(self.settings, self.diamond.writer_ids())
        recovery = self._until(lambda: _every_writer_committed(markers),
                               "every detector query to commit after the node resumed", probe=self._probe_transaction)
        markers.close()
        fired = [line for line in log.read_text(errors="replace").splitlines() if GUARD_LINE in line][fired_before:]
        self.observed["alerts_leader_stopped"] = {
            "node": victim, "coordinator": coordinator, "alerts_partitions_led": led[victim],
            "probe_pairs_sent": attempts,
            "guard_fired_in_s": None if fired_in is None else round(fired_in, 1), "guard_fired": len(fired),
            # Why the records failed: their batch expired, or the transaction's request to add their
            # partitions timed out (the coordinator's log append waits for the frozen replica too).
            "first_guard_line": fired[0].split(GUARD_LINE, 1)[1].strip()[:300] if fired else None}
        self._record("alerts_leader_stopped",
                     f"SIGSTOP node {victim} (led {led[victim]} of {sum(1 for t, _ in leaders if t == topic)} "
                     f"alerts partitions, not the writer's coordinator {coordinator}) while a batch alerting into "
                     "one of them ran, until the writer's guard fired, then SIGCONT",
                     at, published, resumed - stopped, None if recovery is None else time.monotonic() - resumed,
                     f"guard fired {fired_in:.1f} s after the stop" if fired_in is not None else "guard did not fire")

    def _stop_during_probe_batch(self, pid: int, victim: int, leaders: dict, writer: str) -> tuple[float, int]:
        """SIGSTOP ``pid`` once the rule query has planned, and not yet committed, a batch holding a
        double-swipe pair whose alert goes to a partition ``victim`` leads (the module's docstring says
        why); a new pair when the batch committed before the stop. The stop's time and the pairs sent."""
        checkpoint = local_folder(checkpoint_location(self.settings.checkpoint_root, writer))
        topic = self.settings.topic_transactions
        # The topic's ends asked again each time: a request the simulator had sent may still land.
        wait_until(lambda: self._check() or _read_up_to(checkpoint, topic, end_offsets(self.settings, topic)), 300,
                   "the rule query to read what the paused simulator published", interval=0.5)
        card = probe_card(leaders, self.settings.topic_alerts, topic, victim)
        producer = make_producer(self.settings)
        try:
            for attempt in range(1, PROBE_ATTEMPTS + 1):
                at = latest_event_time(self.settings) + timedelta(seconds=attempt)
                sent = [producer.send(topic, key=card.encode(), value=json_bytes(txn))
                        for txn in double_swipe_pair(card, attempt, at)]
                partition, last = sent[-1].get(timeout=60).partition, max(f.get().offset for f in sent)
                planned: list[int] = []
                wait_until(lambda: planned.extend(_batch_reading(checkpoint, topic, partition, last)) or planned,
                           120, "the rule query to plan the batch with the probe pair", interval=0.01)
                batch = planned[0]
                os.kill(pid, signal.SIGSTOP)
                stopped = time.monotonic()
                if not (checkpoint / "commits" / str(batch)).exists():
                    self.say(f"  node {victim} stopped while batch {batch} (probe pair {attempt}) runs")
                    return stopped, attempt
                os.kill(pid, signal.SIGCONT)
                self.say(f"  batch {batch} committed before the stop; another probe pair")
        finally:
            producer.close()
        raise AssertionError(f"{PROBE_ATTEMPTS} probe batches each committed before node {victim} stopped")


def probe_card(leaders: dict, alerts: str, transactions: str, victim: int) -> str:
    """A card whose alerts go to a partition ``victim`` leads and whose transactions to one it does not."""
    count = lambda topic: sum(1 for t, _ in leaders if t == topic)   # noqa: E731
    for i in range(100_000):
        card = f"{PROBE_PREFIX}{i}"
        if leaders[(alerts, partition_for(card.encode(), count(alerts)))] == victim and \
                leaders[(transactions, partition_for(card.encode(), count(transactions)))] not in (victim, -1):
            return card
    raise AssertionError(f"no card hashes to a partition node {victim} leads")


def double_swipe_pair(card: str, attempt: int, at: datetime) -> list[dict]:
    """Two identical charges a second apart: one double_swipe alert, the second the trigger. Its own
    customer, merchant and terminal, so no detector's state of the run's cards changes."""
    base = {"card_id": card, "customer_id": f"{card}-customer", "merchant_id": f"{card}-merchant",
            "terminal_id": f"{card}-terminal", "amount": 12.34, "currency": "EUR", "mcc": "5411",
            "channel": "ecom", "lat": None, "lon": None}
    return [dict(base, txn_id=f"{card}-{attempt}-{i}", event_time=format_event_time(at + timedelta(seconds=i)))
            for i in range(2)]


def _read_up_to(checkpoint: Path, topic: str, ends: dict[int, int]) -> bool:
    """Whether the newest committed batch of ``checkpoint`` read ``topic`` up to ``ends``."""
    commits = checkpoint_batches(checkpoint)[1]
    with contextlib.suppress(OSError, ValueError):
        if commits:
            return all(source and all(source.get(topic, {}).get(str(p), 0) >= end for p, end in ends.items())
                       for source in batch_end_offsets(checkpoint, commits[-1]))
    return False


def _batch_reading(checkpoint: Path, topic: str, partition: int, offset: int) -> list[int]:
    """The newest batch planned in ``checkpoint`` whose end offsets are past ``offset`` of ``partition``
    (a list of it, or none)."""
    for batch in reversed(checkpoint_batches(checkpoint)[0][-3:]):
        with contextlib.suppress(OSError, ValueError):
            ends = batch_end_offsets(checkpoint, batch)
            if any(source and source.get(topic, {}).get(str(partition), -1) > offset for source in ends):
                return [batch]
    return []


def run_undelivered(base: Settings, out: Path, say: Say) -> tuple[ChaosResult, dict]:
    """The run on the (running) cluster of ``base``, the writer's delivery timeout short."""
    settings = base.replace(run_dir=out / "run", writer_delivery_timeout_ms=DELIVERY_TIMEOUT_MS)
    plan = dataclasses.replace(PLAN, traffic=dataclasses.replace(PLAN.traffic, id_prefix=f"ud{uuid.uuid4().hex[:8]}-"))
    run_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    say(f"undelivered records: {plan.traffic.transactions:,} transactions, the writer's delivery timeout "
        f"{DELIVERY_TIMEOUT_MS} ms, an alerts leader SIGSTOPped")
    with ClusterDiamond(settings, run_id, plan.traffic, say, prefix="undelivered", keep_topics=True,
                        detectors=plan.detectors) as diamond:
        run = UndeliveredRun(plan, diamond, out, say)
        result = run.run()
    return result, run.observed
