"""Parameters applied without redeploy: the job follows the parameters topic and restarts only the query
that runs a changed detector, from its checkpoint (docs/architecture.md, "Parameters at run time").

``ParamsFollower`` reads the compacted topic (``FRAUD_TOPIC_PARAMS``, read_committed, no consumer
group) to its end at start (the sets in force) and then polls it without blocking; the supervisor calls
``JobQueries.apply_params`` about once a second (``supervise``'s ``tick``). A record that does not fit
the code (``detectors.params.from_data``) is logged and skipped: the detector keeps what it runs.

Why a restart and not thresholds read each micro-batch: a detector's parameters are Python values baked
into its plan (``detect(transactions, params)``), the contract every detector is written against; a
restart from the same checkpoint keeps the state and the exactly-once writer's protocol (the new
writer fences the old one, the marker decides whether the interrupted batch is re-written or skipped),
and costs the query's start-up, seconds, for the detectors of that one query only.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone

from common.contracts import ContractError, format_event_time
from common.param_records import ParamRecord, decode_param_record
from common.settings import Settings

log = logging.getLogger("spark_job.live_params")


class ParamsFollower:
    """The records of the parameters topic, from its beginning: ``initial()`` once, then ``poll()``."""

    def __init__(self, settings: Settings, **consumer_config):
        from common.kafka_io import make_consumer
        from kafka import TopicPartition

        self.topic = settings.topic_params
        self.consumer = make_consumer(settings, group_id=None, **consumer_config)
        partitions = self.consumer.partitions_for_topic(self.topic) or set()
        if not partitions:
            log.warning("no topic %s: parameters stay as in the code (create it: python -m deploy up)", self.topic)
        self.partitions = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self.consumer.assign(self.partitions)
        if self.partitions:        # kafka-python reads no partitions as "every assigned one" and raises
            self.consumer.seek_to_beginning(*self.partitions)

    def initial(self, timeout_ms: int = 30_000) -> dict[str, ParamRecord]:
        """The last record per detector, up to the topic's end now."""
        ends = self.consumer.end_offsets(self.partitions) if self.partitions else {}
        found: dict[str, ParamRecord] = {}
        deadline = time.monotonic() + timeout_ms / 1000
        while any(self.consumer.position(tp) < ends[tp] for tp in self.partitions):
            found.update(self._decode(self.consumer.poll(timeout_ms=200)))
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read {self.topic} to its end in {timeout_ms / 1000:.0f} s")
        return found

    def poll(self) -> dict[str, ParamRecord]:
        """Records committed since the last call, the last per detector (empty when none)."""
        return self._decode(self.consumer.poll(timeout_ms=0)) if self.partitions else {}

    def _decode(self, batches: dict) -> dict[str, ParamRecord]:
        found: dict[str, ParamRecord] = {}
        for records in batches.values():
            for record in records:
                try:
                    decoded = decode_param_record(record.value)
                except ContractError as error:
                    log.error("%s offset %d: not a parameter record (%s): skipped", self.topic, record.offset, error)
                    continue
                found[decoded.detector] = decoded
        return found

    def close(self) -> None:
        self.consumer.close()


def follow_params(settings: Settings, wait: bool, say=log.warning,
                  **consumer_config) -> tuple[ParamsFollower, dict[str, ParamRecord]]:
    """A ``ParamsFollower`` and the parameter sets in force. With ``wait`` (a standby, which has nothing to do
    until it reaches the broker) a broker that is away, or goes away while they are read, is waited for
    (``wait_for_kafka``) and they are read again: the chaos plan's broker outage once began while a
    standby started, and it exited."""
    from kafka.errors import KafkaError

    from common.kafka_clients import KafkaConnectError, wait_for_kafka

    while True:
        follower = None
        try:
            follower = ParamsFollower(settings, **consumer_config)
            return follower, follower.initial()
        except (KafkaConnectError, KafkaError, TimeoutError) as error:
            if follower is not None:
                follower.close()
            if not wait:
                raise
            say(f"the parameters could not be read ({str(error).splitlines()[0]}): waiting for the Kafka broker")
            wait_for_kafka(settings, say=say)


def applied_entry(record: ParamRecord | None, params: dict, applied_at: datetime | None = None) -> str:
    """What the dashboard shows of a detector's parameters (Redis ``{ns}:params``, JSON)."""
    applied = format_event_time(applied_at or datetime.now(timezone.utc))
    return json.dumps({"version": record.version if record else 0, "params": params,
                       "set_at": record.set_at if record else None, "author": record.author if record else None,
                       "reason": record.reason if record else None, "applied_at": applied}, sort_keys=True)


class RedisParams:
    """Publishes the parameters each detector runs with to ``{ns}:params`` for the dashboard."""

    def __init__(self, settings: Settings):
        from common.redis_clients import redis_client
        from common.redis_keys import RedisKeys

        self.client = redis_client(settings)
        self.key = RedisKeys(settings.sinks_namespace).params

    def __call__(self, detector: str, entry: str) -> None:
        try:
            self.client.hset(self.key, detector, entry)
        except Exception as error:  # Redis away: the job runs on, the dashboard shows the last it knew
            log.warning("could not publish the parameters of %s: %s", detector, error)
