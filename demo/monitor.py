"""Live figures of a running diamond, read from Kafka and Redis: for the demo's terminal view and report.

A background thread follows the transactions topic (record timestamps: when each transaction
entered Kafka), the alerts topic (``read_committed``) and the dead-letter topic. Latency is measured per
detector from the moment the triggering transaction entered Kafka (the alert's ``ingested_at``, else
the transaction's record timestamp) to the alert being committed: the moment this ``read_committed``
reader receives it (``written`` is to its ``detected_at``, before the commit). The simulator runs its
clock faster than the wall clock, so event time to alert would measure the simulation, not the system.
Consumer lag is sampled from the detector job's progress files: the topic's end offsets minus the
offsets each query has read up to.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from datetime import datetime, timedelta, timezone

from common.contracts import ContractError, decode_transaction, parse_event_time
from common.kafka_io import make_consumer
from common.quantiles import quantile
from common.settings import Settings


def _parse_time(text: str) -> float:
    return parse_event_time(text).timestamp()


def _txn_id(record, max_ahead: timedelta) -> str | None:
    """The ``txn_id`` of a record the contract accepts as a transaction (as the detector job does); None
    for anything else the topic may hold, which the job dead-letters."""
    try:
        return decode_transaction(record.value, key=record.key, check_key=True, max_ahead=max_ahead,
                                  record_time=datetime.fromtimestamp(record.timestamp / 1000, timezone.utc))["txn_id"]
    except ContractError:
        return None


class PipelineMonitor(threading.Thread):
    def __init__(self, settings: Settings):
        super().__init__(name="pipeline-monitor", daemon=True)
        self.settings = settings
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.ingested_at: dict[str, float] = {}       # txn_id -> Kafka timestamp (s)
        self.transactions = 0
        self.dead_letters = 0
        self.alert_ids: Counter[str] = Counter()
        self.alerts_by_detector: Counter[str] = Counter()
        self.alerts: list[dict] = []
        self.latencies: list[float] = []                       # committed, every detector
        self.committed_by_detector: dict[str, list[float]] = {}
        self.ingested_by_detector: dict[str, list[float]] = {}   # beside committed_by_detector: when each came in
        self.written_by_detector: dict[str, list[float]] = {}
        self.last_alert_at: float | None = None
        self.last_transaction_at: float | None = None          # the traffic's, not the drain's ticks
        self.first_transaction_at: float | None = None
        self.lag_samples: list[tuple[float, int]] = []          # (wall time, the largest lag of any query)
        self.first_alert_at: float | None = None
        self._rate_window: deque[tuple[float, int]] = deque(maxlen=20)

    def run(self) -> None:
        s = self.settings
        consumer = make_consumer(s, group_id=None, isolation_level="read_committed", max_poll_records=5000)
        consumer.subscribe([s.topic_transactions, s.topic_alerts, s.topic_dlq])
        pending: list[tuple[dict, float]] = []  # (alert, received) whose transaction we have not read yet
        next_lag = 0.0
        try:
            while not self.stopped.is_set():
                batches = consumer.poll(timeout_ms=200)
                received = time.time()
                with self.lock:
                    for tp, records in batches.items():
                        if tp.topic == s.topic_transactions:
                            self._transactions(records)
                        elif tp.topic == s.topic_alerts:
                            pending.extend((alert, received) for alert in self._alerts(records))
                        else:
                            self.dead_letters += len(records)
                    pending = [(a, at) for a, at in pending if not self._latency(a, at)]
                    self._rate_window.append((time.monotonic(), self.transactions))
                if received >= next_lag:
                    next_lag = received + 1.0
                    self._sample_lag(consumer, received)
        finally:
            consumer.close()

    def _transactions(self, records) -> None:
        for record in records:
            txn_id = _txn_id(record, self.settings.event_time_max_ahead)
            if txn_id is None:
                continue  # a broken record: the dead-letter topic has it, and it is counted there
            self.transactions += 1
            self.ingested_at[txn_id] = record.timestamp / 1000
            if not str(txn_id).startswith("tick-"):
                at = record.timestamp / 1000
                self.last_transaction_at = max(self.last_transaction_at or 0.0, at)
                if self.first_transaction_at is None or at < self.first_transaction_at:
                    self.first_transaction_at = at

    def _alerts(self, records) -> list[dict]:
        fresh = []
        for record in records:
            alert = json.loads(record.value)
            self.alert_ids[alert["alert_id"]] += 1
            if self.alert_ids[alert["alert_id"]] > 1:
                continue
            if self.first_alert_at is None:
                self.first_alert_at = time.time()
            self.alerts_by_detector[alert["detector"]] += 1
            self.alerts.append(alert)
            fresh.append(alert)
        return fresh

    def _latency(self, alert: dict, received: float) -> bool:
        ingested = (_parse_time(alert["ingested_at"]) if alert.get("ingested_at")
                    else self.ingested_at.get(alert["txn_ids"][-1]))
        if ingested is None:
            return False
        self.latencies.append(received - ingested)
        self.committed_by_detector.setdefault(alert["detector"], []).append(received - ingested)
        self.ingested_by_detector.setdefault(alert["detector"], []).append(ingested)
        self.written_by_detector.setdefault(alert["detector"], []).append(_parse_time(alert["detected_at"]) - ingested)
        self.last_alert_at = received
        return True

    def _sample_lag(self, consumer, now: float) -> None:
        """The largest consumer lag of the detector job's queries (records in the topic they have not read)."""
        from kafka import TopicPartition

        progress_dir = self.settings.run_dir / "progress"
        read = [json.loads(p.read_text()).get("end_offset_total") or 0
                for p in progress_dir.glob("*.json")] if progress_dir.exists() else []
        if not read:
            return
        topic = self.settings.topic_transactions
        partitions = consumer.partitions_for_topic(topic) or ()
        end = sum(consumer.end_offsets([TopicPartition(topic, p) for p in partitions]).values())
        with self.lock:
            self.lag_samples.append((now, max(0, end - min(read))))

    def _second_half(self, detector: str) -> list[float]:
        """Latencies of the alerts whose transaction came in the second half of the traffic: the detector
        job starts with the traffic, and its JVM compiles its hot code during the first minute."""
        if self.first_transaction_at is None or self.last_transaction_at is None:
            return []
        middle = (self.first_transaction_at + self.last_transaction_at) / 2
        return [latency for latency, ingested in zip(self.committed_by_detector[detector],
                                                     self.ingested_by_detector[detector]) if ingested >= middle]

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join(timeout=10)

    def snapshot(self) -> dict:
        with self.lock:
            window = list(self._rate_window)
            rate = 0.0
            if len(window) >= 2 and window[-1][0] > window[0][0]:
                rate = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
            by_detector = {name: {"p50": quantile(values, 0.5), "p99": quantile(values, 0.99),
                                  "second_half_p99": quantile(self._second_half(name), 0.99),
                                  "written_p99": quantile(self.written_by_detector[name], 0.99),
                                  "count": len(values)}
                           for name, values in sorted(self.committed_by_detector.items())}
            return {
                "transactions": self.transactions, "transactions_per_second": round(rate),
                "alerts": sum(self.alerts_by_detector.values()), "alerts_by_detector": dict(self.alerts_by_detector),
                "duplicate_alert_ids": sum(n - 1 for n in self.alert_ids.values()),
                "dead_letters": self.dead_letters,
                "latency_p50_s": quantile(self.latencies, 0.5), "latency_p99_s": quantile(self.latencies, 0.99),
                "first_alert_at": self.first_alert_at, "last_alert_at": self.last_alert_at,
                "last_transaction_at": self.last_transaction_at,
                "latency_by_detector": by_detector,
                "lag": self.lag_samples[-1][1] if self.lag_samples else None,
            }

