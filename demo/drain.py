"""When has the diamond finished with the traffic? Decided from Kafka alone, so on any stack.

Once the producer is done, ``Drain`` publishes a "watermark tick": a transaction on a card of its own
(``detectors.harness.watermark_tick``) whose event time is ``TICK_AFTER``
past the latest event time in the topic. It moves every query's watermark past the stream, so
event-time windows still open (a card-testing burst at the very end) close and report, as they would
under continuing traffic.

Progress is read from the marker topic: every writer (one per query of the detector job) commits one marker per micro-batch, in the same Kafka transaction as the batch's output
(``spark_job/alert_writer.py``). Micro-batches of a query run one after the other, the next planned only
when the previous one committed. So among the markers a writer committed after the tick was in the
topic, the 1st may belong to a batch planned before it, the 2nd read everything up to the tick, and
the 3rd ran with the watermark the tick moved: its alerts are the last the traffic can cause.
Drained = every writer has committed ``BATCHES_AFTER_TICK`` (3) markers since the tick. A query with
nothing left to read runs no batch, so a further tick (1 ms later, on a card of its own: no
detector pairs two of them) is published every ``NUDGE_SECONDS`` until then.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from typing import Iterable

from common.contracts import format_event_time, parse_event_time
from common.kafka_io import assigned_consumer, json_bytes, make_consumer, make_producer
from common.settings import Settings

TICK_AFTER = timedelta(minutes=30)       # > the longest watermark delay plus the longest window gap
BATCHES_AFTER_TICK = 3
NUDGE_SECONDS = 5.0
TAIL_RECORDS = 500                       # per partition: the latest event times are among the last arrivals


def writer_ids(names: Iterable[str] | None = None, groups: str | None = None) -> list[str]:
    """The writers a running ``python -m detectors run [NAMES]`` has: one per query of its plan
    (``spark_job.options.plan_queries``) with the detector groups ``groups`` (default: the settings')."""
    from common.settings import get_settings
    from detectors import registry
    from spark_job.options import RunOptions, parse_groups, plan_queries

    detectors = [registry.get(n).name for n in names] if names else registry.names()
    spec = get_settings().detector_groups if groups is None else groups
    return [plan.name for plan in plan_queries(detectors, RunOptions(groups=parse_groups(spec)))]


def latest_event_time(settings: Settings, topic: str | None = None, timeout: float = 60.0) -> datetime | None:
    """The latest event time among the last ``TAIL_RECORDS`` records of each partition (None: empty topic)."""
    from kafka import TopicPartition

    topic = topic or settings.topic_transactions
    consumer = make_consumer(settings, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not tps:
            raise ValueError(f"topic {topic!r} does not exist")
        consumer.assign(tps)
        begin, end = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, max(begin[tp], end[tp] - TAIL_RECORDS))
        latest, deadline = None, time.monotonic() + timeout
        while any(consumer.position(tp) < end[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read the tail of {topic} in {timeout:.0f} s")
            for records in consumer.poll(timeout_ms=200).values():
                for record in records:
                    moment = _event_time(record.value)
                    if moment and (latest is None or moment > latest):
                        latest = moment
        return latest
    finally:
        consumer.close()


def _event_time(value: bytes | None) -> datetime | None:
    try:
        return parse_event_time(json.loads(value)["event_time"])
    except (ValueError, TypeError, KeyError):
        return None          # a bad record: it has no usable event time


class MarkerCounter:
    """The markers each writer has committed (read with ``read_committed``) since this was created."""

    def __init__(self, settings: Settings, writers: Iterable[str]):
        self.counts = {w: 0 for w in writers}
        self._consumer, _ = assigned_consumer(settings, settings.topic_alert_markers, from_end=True)

    def poll(self, timeout_ms: int = 200) -> dict[str, int]:
        for records in self._consumer.poll(timeout_ms=timeout_ms).values():
            for record in records:
                writer = record.key.decode() if record.key else None
                if writer in self.counts:
                    self.counts[writer] += 1
        return self.counts

    def below(self, n: int) -> dict[str, int]:
        """Writers with fewer than ``n`` markers, with their counts."""
        return {w: c for w, c in self.counts.items() if c < n}

    def close(self) -> None:
        self._consumer.close()


class Drain:
    """``done()`` is polled once the producer has finished; ``close()`` when finished with it."""

    def __init__(self, settings: Settings, writers: Iterable[str]):
        self.settings = settings
        self.writers = list(writers)
        self._producer = None
        self._markers: MarkerCounter | None = None
        self._tick_at: datetime | None = None
        self._ticks = 0
        self._last_tick = 0.0

    def done(self) -> bool:
        if self._markers is None:
            self._first_tick()
        elif time.monotonic() - self._last_tick > NUDGE_SECONDS and not self._all_done():
            self._tick_at += timedelta(milliseconds=1)
            self._send_tick()
        self._markers.poll()
        return self._all_done()

    def waiting_for(self) -> dict[str, int]:
        """Writers not done yet, with the number of markers they committed since the tick."""
        if self._markers is None:
            return {w: 0 for w in self.writers}
        return self._markers.below(BATCHES_AFTER_TICK)

    def close(self) -> None:
        for client in (self._producer, self._markers):
            if client is not None:
                client.close()

    def _all_done(self) -> bool:
        return not self.waiting_for()

    def _first_tick(self) -> None:
        latest = latest_event_time(self.settings) or datetime.now(timezone.utc)
        # Never ahead of the broker's clock: further than the contract accepts, it would be dead-lettered.
        self._tick_at = min(latest + TICK_AFTER, datetime.now(timezone.utc))
        self._producer = make_producer(self.settings)
        self._send_tick()
        self._markers = MarkerCounter(self.settings, self.writers)

    def _send_tick(self) -> None:
        from detectors.harness import watermark_tick

        tick = watermark_tick(format_event_time(self._tick_at))
        # Each tick on a card of its own: two ticks on one card, same terminal and amount, 1 ms apart,
        # would be a double swipe to the live detectors (the harness drops such alerts; a topic cannot).
        tick["card_id"] = f"{tick['card_id']}{self._ticks}"
        self._producer.send(self.settings.topic_transactions, key=tick["card_id"], value=json_bytes(tick)).get(timeout=30)
        self._ticks += 1
        self._last_tick = time.monotonic()
