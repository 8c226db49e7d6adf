"""A run on the local cluster that makes the exactly-once writer's records undeliverable, so its guard
(``UndeliveredRecordsError``, ``spark_job/alert_writer.py`` ``write_batch``) must fire: the Kafka node
leading some of the ``alerts`` partitions (not the writer's transaction coordinator) is SIGSTOPped while
the writer's delivery timeout is short (``FRAUD_WRITER_DELIVERY_TIMEOUT_MS``). The producer keeps
sending to the frozen leader until its records expire, before the controller has moved the leadership;
kafka-python fails them without making the transaction abortable. The guard aborts the transaction
instead of committing the batch without them; the query restarts from its checkpoint and the batch is
re-run. The node is resumed (SIGCONT) once the guard has fired. Counted the chaos suite's way."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import uuid
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from common.settings import Settings
from common.waiting import wait_until
from demo.diamond import Traffic
from demo.drain import MarkerCounter
from deploy import cluster
from tests.cluster.cluster_chaos import (ClusterChaosRun, ClusterDiamond, _count_lines, partition_leaders,
                                        transaction_coordinator)
from tests.e2e.chaos import ChaosPlan, ChaosResult, Say, _every_writer_committed

GUARD_LINE = "alert_writer: UndeliveredRecordsError"    # the writer's one log line when its guard fires
GUARD_TIMEOUT_S = 120.0
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
        writer = f"fraud-writer.{topic}.{self.diamond.writer_ids()[0]}"
        leaders: dict = {}
        wait_until(lambda: leaders.update(partition_leaders(self.settings, [topic])) or leaders, 60,
                   "the alerts partitions' leaders", interval=1)
        coordinator = wait_until(lambda: transaction_coordinator(self.settings, writer), 60, "the writer's coordinator")
        # A leader of alerts partitions that is not the coordinator: with the coordinator frozen, the
        # transaction itself would hang (another failure, the cluster chaos run's kafka_broker).
        led = Counter(leader for leader in leaders.values() if leader != coordinator)
        victim = led.most_common(1)[0][0]
        node = cluster.ClusterBroker(self.cluster, victim)
        pid = node.pid()
        log = self.diamond.group.children["detectors"].log_path
        fired_before = _count_lines(log, GUARD_LINE)
        stopped = time.monotonic()
        os.kill(pid, signal.SIGSTOP)
        fired_in = None
        try:
            wait_until(lambda: self._check() or _count_lines(log, GUARD_LINE) > fired_before, GUARD_TIMEOUT_S,
                       "the writer's guard to fire", interval=0.5)
            fired_in = time.monotonic() - stopped
        except TimeoutError:
            pass
        finally:
            os.kill(pid, signal.SIGCONT)
        resumed = time.monotonic()
        markers = MarkerCounter(self.settings, self.diamond.writer_ids())
        recovery = self._until(lambda: _every_writer_committed(markers),
                               "every detector query to commit after the node resumed", probe=self._probe_transaction)
        markers.close()
        fired = [line for line in log.read_text(errors="replace").splitlines() if GUARD_LINE in line][fired_before:]
        self.observed["alerts_leader_stopped"] = {
            "node": victim, "coordinator": coordinator, "alerts_partitions_led": led[victim],
            "guard_fired_in_s": None if fired_in is None else round(fired_in, 1), "guard_fired": len(fired),
            # Why the records failed: their batch expired, or the transaction's request to add their
            # partitions timed out (the coordinator's log append waits for the frozen replica too).
            "first_guard_line": fired[0].split(GUARD_LINE, 1)[1].strip()[:300] if fired else None}
        self._record("alerts_leader_stopped",
                     f"SIGSTOP node {victim} (led {led[victim]} of {len(leaders)} alerts partitions, not the "
                     f"writer's coordinator {coordinator}) until the writer's guard fired, then SIGCONT",
                     at, published, resumed - stopped, None if recovery is None else time.monotonic() - resumed,
                     f"guard fired {fired_in:.1f} s after the stop" if fired_in is not None else "guard did not fire")


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
