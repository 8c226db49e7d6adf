"""Alert enricher: ``alerts`` (read_committed) -> customer, card and merchant context -> ``alerts.enriched``.

Run: ``python -m sinks.enricher worker -l info`` (settings from ``common.settings``; app id / consumer
group from ``FRAUD_ENRICHER_APP_ID``, see ``common/settings.py``).

At-least-once with idempotent effects (docs/architecture.md, "Exactly once"), per batch of alerts taken from the
stream, in this order:

1. decode and validate each alert (an alert breaking the contract is logged and counted, not
   enriched: alerts come from our own transactional writers, so this is a bug upstream);
2. ask Redis which alert_ids were already enriched (``{ns}:seen:enricher:{alert_id}``) and drop them;
3. record each remaining alert in the card's recent-alert set (ZADD, idempotent) and read the card,
   customer and merchant profiles and the card's recent alert count;
4. enrich (``sinks.enrichment.enrich``, pure) and send every enriched alert (key = card_id), then wait
   until the broker acknowledged all of them (acks=all);
5. only then ``SET NX EX`` the seen keys;
6. the batch's events are acknowledged to Faust when the loop moves on, and their offsets committed
   by Faust after it flushed its producer.

A crash between 4 and 5 re-enriches the batch after the restart: its alerts appear twice in
``alerts.enriched`` (the same alert_id), never zero times. Setting the seen key first would do the
opposite (a crash after SET NX but before the send loses the alert forever), which is why the key is
set last. Readers of ``alerts.enriched`` (the case manager) are idempotent on alert_id.
Redis unavailable: every Redis step retries with exponential backoff until Redis is back; the
agent waits, so no offset moves past an alert that was not published.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Iterable, Sequence

from common.card_numbers import safe_excerpt
from common.cli_errors import run_command
from common.contracts import ContractError, card_key, customer_key, merchant_key, parse_event_time
from common.kafka_io import json_bytes
from common.settings import get_settings
from sinks.enrichment import RECENT_WINDOW_HOURS, customer_id_of, decode_alert, enrich
from sinks import metrics
from sinks.faust_support import exit_on_agent_error, main as run_cli, make_app, redis_client, retry_forever
from common.redis_keys import RedisKeys

log = logging.getLogger(__name__)

BATCH_SIZE = 500
BATCH_WITHIN_SECONDS = 0.05
SERVICE = "enricher"
WINDOW_MS = RECENT_WINDOW_HOURS * 3600 * 1000


@dataclass
class BatchResult:
    published: list[dict] = field(default_factory=list)
    duplicates: int = 0
    invalid: int = 0


class RedisContextStore:
    """The enricher's Redis I/O: dedup keys, the card's recent alerts, the profiles."""

    def __init__(self, redis, keys: RedisKeys, dedup_ttl_seconds: int):
        self.redis = redis
        self.keys = keys
        self.ttl = dedup_ttl_seconds

    async def already_enriched(self, alert_ids: Sequence[str]) -> set[str]:
        async def op():
            found = await self.redis.mget([self.keys.seen(SERVICE, a) for a in alert_ids])
            return {a for a, value in zip(alert_ids, found) if value is not None}
        return await retry_forever("redis: read dedup keys", op)

    async def contexts(self, alerts: Sequence[dict]) -> list[tuple[dict, dict, dict, int]]:
        """(customer, card, merchant, recent alert count) per alert."""
        async def op():
            pipe = self.redis.pipeline(transaction=False)
            for alert in alerts:
                at = int(parse_event_time(alert["event_time"]).timestamp() * 1000)
                key = self.keys.card_alerts(alert["card_id"])
                pipe.zadd(key, {alert["alert_id"]: at})
                pipe.zremrangebyscore(key, "-inf", at - 7 * WINDOW_MS)   # bounded: a week of alerts
                pipe.expire(key, 8 * 24 * 3600)
                pipe.zcount(key, at - WINDOW_MS, at)
                pipe.hgetall(card_key(alert["card_id"]))
                if alert.get("merchant_id"):
                    pipe.hgetall(merchant_key(alert["merchant_id"]))
                else:
                    pipe.exists("")  # no merchant named: a placeholder keeps 6 replies per alert
            replies = await pipe.execute()
            cards, merchants, counts = [], [], []
            for i, alert in enumerate(alerts):
                _, _, _, count, card, merchant = replies[6 * i: 6 * i + 6]
                counts.append(int(count))
                cards.append(card or {})
                merchants.append(merchant if isinstance(merchant, dict) else {})
            pipe = self.redis.pipeline(transaction=False)
            for alert, card in zip(alerts, cards):
                customer_id = customer_id_of(alert, card)
                if customer_id:
                    pipe.hgetall(customer_key(customer_id))
                else:
                    pipe.exists("")  # placeholder: one reply per alert
            customers = [c if isinstance(c, dict) else {} for c in await pipe.execute()]
            return list(zip(customers, cards, merchants, counts))
        return await retry_forever("redis: read profiles", op)

    async def mark_enriched(self, alert_ids: Iterable[str]) -> None:
        async def op():
            pipe = self.redis.pipeline(transaction=False)
            for a in alert_ids:
                pipe.set(self.keys.seen(SERVICE, a), "1", nx=True, ex=self.ttl)
            await pipe.execute()
        await retry_forever("redis: write dedup keys", op)


Publisher = Callable[[list[tuple[str, dict]]], Awaitable[None]]


async def process_batch(raw_values: Sequence[Any], store: RedisContextStore, publish: Publisher,
                        now: datetime) -> BatchResult:
    """Steps 1-5 of the module docstring for one batch; ``publish`` returns once all are acked."""
    result = BatchResult()
    alerts: dict[str, dict] = {}
    for raw in raw_values:
        try:
            alert = decode_alert(raw)
        except ContractError as exc:
            result.invalid += 1
            log.error("alert breaks the contract, not enriched: %s (%s)", exc, safe_excerpt(raw))
            continue
        if alert["alert_id"] in alerts:
            result.duplicates += 1
            continue
        alerts[alert["alert_id"]] = alert
    if not alerts:
        return result
    seen = await store.already_enriched(list(alerts))
    result.duplicates += len(seen)
    fresh = [a for a_id, a in alerts.items() if a_id not in seen]
    if not fresh:
        return result
    contexts = await store.contexts(fresh)
    enriched = [enrich(alert, customer, card, merchant, count, now)
                for alert, (customer, card, merchant, count) in zip(fresh, contexts)]
    await publish([(e["card_id"], e) for e in enriched])
    await store.mark_enriched([e["alert_id"] for e in enriched])
    result.published = enriched
    return result


# --- the Faust app: I/O only ------------------------------------------------------------------

settings = get_settings()
app = make_app(settings.enricher_app_id, settings)
alerts_topic = app.topic(settings.topic_alerts, key_serializer="raw", value_serializer="raw")
enriched_topic = app.topic(settings.topic_alerts_enriched, key_serializer="raw",
                           value_serializer="raw")
_store: RedisContextStore | None = None


def store() -> RedisContextStore:
    global _store
    if _store is None:
        _store = RedisContextStore(redis_client(settings), RedisKeys(settings.sinks_namespace),
                                   settings.enricher_dedup_ttl)
    return _store


async def publish_enriched(records: list[tuple[str, dict]]) -> None:
    """Send every record, then wait for all the broker's acknowledgements. Records whose send failed
    (after the producer's own retries) are sent again, only those: a resent record can still be a
    duplicate if the broker wrote it but its answer was lost, but none is lost."""
    from aiokafka.errors import KafkaError
    from faust.exceptions import ProducerSendError

    async def send(key: str, value: dict):
        return await enriched_topic.send(key=key.encode(), value=json_bytes(value))

    await resend_failed(records, send, retry=lambda op: retry_forever(
        "kafka: publish enriched alerts", op, retry_on=(KafkaError, ProducerSendError)))


async def resend_failed(records: list[tuple[str, dict]], send, retry) -> None:
    """``send`` each record (a coroutine returning the delivery future), wait for every delivery, and
    ``retry`` the operation on the records not yet delivered until none is left."""
    pending = list(records)

    async def send_pending():
        nonlocal pending
        results = await asyncio.gather(*[await send(key, value) for key, value in pending], return_exceptions=True)
        failed = [(record, result) for record, result in zip(pending, results) if isinstance(result, BaseException)]
        pending = [record for record, _ in failed]
        if failed:
            raise failed[0][1]

    await retry(send_pending)


@app.agent(alerts_topic)
async def enrich_alerts(stream):
    async for batch in stream.take(BATCH_SIZE, within=BATCH_WITHIN_SECONDS):
        try:
            result = await process_batch(batch, store(), publish_enriched, datetime.now(timezone.utc))
        except Exception:
            exit_on_agent_error("enricher")
        metrics.RECORDS.labels(SERVICE).inc(len(batch))
        metrics.PUBLISHED.labels(SERVICE).inc(len(result.published))
        metrics.DEDUPE_HITS.labels(SERVICE).inc(result.duplicates)
        metrics.INVALID.labels(SERVICE).inc(result.invalid)
        if result.duplicates or result.invalid:
            log.info("enriched %d, dropped %d already enriched, %d invalid",
                     len(result.published), result.duplicates, result.invalid)


metrics.install(app, SERVICE, settings.topic_alerts)


def main() -> None:
    run_cli(app, settings, lambda: metrics.serve(settings, SERVICE, settings.enricher_metrics_port))


if __name__ == "__main__":
    sys.exit(run_command(main, "python -m sinks.enricher"))
