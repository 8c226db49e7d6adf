"""The parameters topics, read and written (``python -m detectors params``; records: common/param_records.py).

``current`` reads the compacted topic to its end and keeps the last record per detector; ``history``
reads the history topic; ``publish`` writes a new record to both in one Kafka transaction, so the
history never misses a change that took effect, nor holds one that did not. The version is the
current one plus one: two analysts setting the same detector at once both write, the later record wins
(the job applies every record it reads, in order) and both are in the history with the same version
number; ``history`` shows both.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from common.contracts import ContractError, format_event_time
from common.kafka_io import make_producer, read_topic
from common.param_records import ParamRecord, decode_param_record
from common.settings import Settings


def _records(settings: Settings, topic: str, timeout: float) -> list[ParamRecord]:
    out = []
    for record in read_topic(settings, topic, timeout=timeout):
        try:
            out.append(decode_param_record(record.value))
        except ContractError:
            continue                       # a tombstone or a foreign record: not a parameter set
    return out


def current(settings: Settings, timeout: float = 30.0) -> dict[str, ParamRecord]:
    """The last record per detector on the parameters topic."""
    return {record.detector: record for record in _records(settings, settings.topic_params, timeout)}


def history(settings: Settings, detector: str, timeout: float = 30.0) -> list[ParamRecord]:
    return [r for r in _records(settings, settings.topic_params_history, timeout) if r.detector == detector]


def publish(settings: Settings, record: ParamRecord) -> None:
    """``record`` on the parameters topic and the history topic, atomically."""
    producer = make_producer(settings, transactional_id=f"fraud-params.{uuid.uuid4().hex[:12]}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        key = record.detector.encode("utf-8")
        for topic in (settings.topic_params, settings.topic_params_history):
            producer.send(topic, key=key, value=record.to_json())
        producer.commit_transaction()
    finally:
        producer.close(timeout=10)


def now_text() -> str:
    return format_event_time(datetime.now(timezone.utc))
