"""Small kafka-python helpers: JSON producers and reading a topic to its end with a deadline.

``read_topic`` with ``isolation_level="read_committed"`` is the committed-only reader that tests and
services use for the ``alerts`` topic: it stops at the last stable offset, so it never sees records of
open or aborted transactions.
"""

from __future__ import annotations

import json
import time
from typing import Any, Iterable

from common.kafka_clients import explained_connect_errors, kafka_python_config
from common.settings import Settings


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def make_producer(settings: Settings, **overrides: Any):
    """A keyed producer with the delivery guarantees every writer of this project wants."""
    from kafka import KafkaProducer
    from kafka.serializer import DefaultSerializer

    from common import producer_recovery

    producer_recovery.install()

    config: dict[str, Any] = dict(kafka_python_config(settings), acks="all", enable_idempotence=True,
                                  linger_ms=5, key_serializer=DefaultSerializer())
    config.update(overrides)
    with explained_connect_errors(settings):
        return KafkaProducer(**config)


def make_consumer(settings: Settings, **overrides: Any):
    from kafka import KafkaConsumer

    config: dict[str, Any] = dict(kafka_python_config(settings), enable_auto_commit=False,
                                  auto_offset_reset="earliest", isolation_level="read_committed")
    config.update(overrides)
    with explained_connect_errors(settings):
        return KafkaConsumer(**config)


def assigned_consumer(settings: Settings, topic: str, from_end: bool = False, **overrides: Any):
    """A group-less consumer of every partition of ``topic`` (read_committed), at its beginning or at
    its current end (the last stable offsets: what is committed from now on). Returns (consumer, partitions)."""
    from kafka import TopicPartition

    consumer = make_consumer(settings, group_id=None, **overrides)
    tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    consumer.assign(tps)
    if from_end:
        for tp, offset in consumer.end_offsets(tps).items():
            consumer.seek(tp, offset)
    else:
        consumer.seek_to_beginning(*tps)
    return consumer, tps


def read_topic(settings: Settings, topic: str, timeout: float = 60.0,
               isolation_level: str = "read_committed", min_records: int = 0) -> list:
    """Every record of ``topic`` from the beginning to its current end (and at least ``min_records``).

    Raises ``TimeoutError`` if the end (or ``min_records``) is not reached within ``timeout`` seconds.
    """
    from kafka import TopicPartition

    consumer = make_consumer(settings, isolation_level=isolation_level, group_id=None)
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise ValueError(f"topic {topic!r} does not exist")
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        records: list = []
        deadline = time.monotonic() + timeout
        while True:
            end = consumer.end_offsets(tps)
            for batch in consumer.poll(timeout_ms=200).values():
                records.extend(batch)
            caught_up = all(consumer.position(tp) >= end[tp] for tp in tps)
            if caught_up and len(records) >= min_records:
                return records
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(records)} records of {topic} in {timeout:.0f} s "
                                   f"(wanted the end of the topic and at least {min_records})")
    finally:
        consumer.close()


def json_values(records: Iterable) -> list[dict]:
    return [json.loads(r.value) for r in records]
