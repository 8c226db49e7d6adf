"""Live figures of a running diamond, read from Kafka and Redis: for the demo's terminal view and report.

A background thread follows the transactions topic (record timestamps: when each transaction
entered Kafka), the alerts topic (``read_committed``) and the dead-letter topic. Latency is measured
from the moment the triggering transaction entered Kafka to the alert's ``detected_at``: the
simulator runs its clock faster than the wall clock, so event time to alert would measure the
simulation, not the system.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, deque
from datetime import datetime

from common.kafka_io import make_consumer
from common.settings import Settings


def _parse_time(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp() if text.endswith("Z") else 0.0


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
        self.latencies: list[float] = []
        self.first_alert_at: float | None = None
        self._rate_window: deque[tuple[float, int]] = deque(maxlen=20)

    def run(self) -> None:
        s = self.settings
        consumer = make_consumer(s, group_id=None, isolation_level="read_committed", max_poll_records=5000)
        consumer.subscribe([s.topic_transactions, s.topic_alerts, s.topic_dlq])
        pending: list[dict] = []  # alerts whose triggering transaction we have not read yet
        try:
            while not self.stopped.is_set():
                batches = consumer.poll(timeout_ms=500)
                with self.lock:
                    for tp, records in batches.items():
                        if tp.topic == s.topic_transactions:
                            self._transactions(records)
                        elif tp.topic == s.topic_alerts:
                            pending.extend(self._alerts(records))
                        else:
                            self.dead_letters += len(records)
                    pending = [a for a in pending if not self._latency(a)]
                    self._rate_window.append((time.monotonic(), self.transactions))
        finally:
            consumer.close()

    def _transactions(self, records) -> None:
        for record in records:
            self.transactions += 1
            try:
                txn_id = json.loads(record.value)["txn_id"]
            except (ValueError, KeyError, TypeError):
                continue  # a bad record: the dead-letter topic has it
            self.ingested_at[txn_id] = record.timestamp / 1000

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

    def _latency(self, alert: dict) -> bool:
        ingested = self.ingested_at.get(alert["txn_ids"][-1])
        if ingested is None:
            return False
        self.latencies.append(_parse_time(alert["detected_at"]) - ingested)
        return True

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
            latencies = sorted(self.latencies)
            return {
                "transactions": self.transactions, "transactions_per_second": round(rate),
                "alerts": sum(self.alerts_by_detector.values()), "alerts_by_detector": dict(self.alerts_by_detector),
                "duplicate_alert_ids": sum(n - 1 for n in self.alert_ids.values()),
                "dead_letters": self.dead_letters,
                "latency_p50_s": _quantile(latencies, 0.5), "latency_p99_s": _quantile(latencies, 0.99),
                "first_alert_at": self.first_alert_at,
            }


def _quantile(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return round(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))], 3)
