"""Case manager: ``alerts.enriched`` -> cases per card (Faust table + changelog) -> ``cases`` and Redis.

Run: ``python -m services.cases worker -l info`` (app id / consumer group from ``FRAUD_CASES_APP_ID``).

State: the table ``card-cases`` maps card_id to ``{"case": open case, "previous_case": closed case}``
(``services.case_logic.apply_to_card``); its changelog topic ``{app_id}-card-cases-changelog``
(compacted, created by Faust with the alert topics' partition count and replication from the
settings) rebuilds it on restart, so cases survive restarts and rebalances.

Per enriched alert, in this order (at-least-once, idempotent on alert_id):

1. apply the alert to the card's state (pure); a new alert_id updates the table (its changelog record
   is sent to the source partition) and yields the case versions to publish;
2. write the current case(s) and the alert's dashboard records to Redis in one MULTI/EXEC
   (``common/redis_keys.py``: every write is a SET/ZADD/SADD/HSET of the same value, so repeating it
   is harmless);
3. send the case versions to ``cases`` (key = card_id, value = the whole case, ``version``
   increasing); Faust flushes the producer (changelog and cases) before it commits the offset.

An alert_id already handled (in the card's open case or its previous, closed one: a redelivery, or
the enricher's at-least-once duplicate) changes no state and re-does steps 2 and 3 with the card's
current versions, the closed case first: a crash between 1 and 3 is healed by the redelivery, at the
price of repeated case versions on ``cases`` (readers keep the highest version per case_id). Without
the closed case, a crash right after an alert closed a case left that case "open" on the topic for
good (found by the crash test with two cases per card).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, Awaitable, Callable, MutableMapping

from common.card_numbers import safe_excerpt
from common.cli_errors import run_command
from common.contracts import ContractError, parse_event_time
from common.kafka_io import json_bytes
from common.settings import get_settings
from services.case_logic import already_handled, apply_to_card, current_versions
from services.enrichment import decode_alert
from services.faust_support import exit_on_agent_error, main as run_cli, make_app, redis_client, retry_forever
from common.redis_keys import KEEP_CLOSED_CASES, KEEP_LATEST_ALERTS, RedisKeys

log = logging.getLogger(__name__)

CASE_TTL_SECONDS = 7 * 24 * 3600
MINUTE_TTL_SECONDS = 2 * 24 * 3600
TRIM_EVERY = 200


def epoch_ms(text: str) -> int:
    return int(parse_event_time(text).timestamp() * 1000)


def alert_summary(alert: dict, case_id: str | None) -> dict:
    """What the dashboard shows of one alert."""
    enrichment = alert.get("enrichment") or {}
    return {
        "alert_id": alert["alert_id"], "detector": alert["detector"], "card_id": alert["card_id"],
        "score": alert["score"], "reason": alert["reason"], "event_time": alert["event_time"],
        "detected_at": alert["detected_at"],
        # when the triggering transaction entered Kafka: the dashboard's latency is detected_at - ingested_at
        # (never event time: the simulator's clock is not the wall clock); None from older writers
        "ingested_at": alert.get("ingested_at"),
        "merchant_name": enrichment.get("merchant_name"), "segment": enrichment.get("segment"),
        "distance_from_home_km": enrichment.get("distance_from_home_km"),
        "profile_missing": alert.get("profile_missing") or [], "case_id": case_id,
    }


class CaseStore:
    """The case manager's Redis I/O: current cases and the dashboard's alert records."""

    def __init__(self, redis, keys: RedisKeys):
        self.redis = redis
        self.keys = keys
        self._writes = 0

    async def save(self, alert: dict, cases: list[dict]) -> None:
        k = self.keys
        minute = alert["detected_at"][:16]                    # 2026-11-22T10:15
        minute_ms = epoch_ms(minute + ":00.000Z")
        minute_tag = minute.replace("-", "").replace("T", "").replace(":", "")
        current = next((c["case_id"] for c in reversed(cases) if alert["alert_id"] in c["alert_ids"]),
                       cases[-1]["case_id"] if cases else None)

        async def op():
            pipe = self.redis.pipeline(transaction=True)
            for case in cases:
                pipe.set(k.case(case["case_id"]), json.dumps(case), ex=CASE_TTL_SECONDS)
                updated = epoch_ms(case["updated_at"])
                if case["status"] == "open":
                    pipe.zadd(k.open_cases, {case["case_id"]: updated})
                else:
                    pipe.zrem(k.open_cases, case["case_id"])
                    pipe.zadd(k.closed_cases, {case["case_id"]: updated})
                    pipe.zremrangebyrank(k.closed_cases, 0, -(KEEP_CLOSED_CASES + 1))
            pipe.zadd(k.latest_alerts, {alert["alert_id"]: epoch_ms(alert["detected_at"])})
            pipe.hset(k.alert_data, alert["alert_id"], json.dumps(alert_summary(alert, current)))
            minute_set = k.minute_set(minute_tag, alert["detector"])
            pipe.sadd(minute_set, alert["alert_id"])
            pipe.expire(minute_set, MINUTE_TTL_SECONDS)
            pipe.zadd(k.minutes, {f"{minute_tag}:{alert['detector']}": minute_ms})
            pipe.zremrangebyscore(k.minutes, "-inf", minute_ms - MINUTE_TTL_SECONDS * 1000)
            await pipe.execute()
        await retry_forever("redis: save case", op)
        self._writes += 1
        if self._writes % TRIM_EVERY == 0:
            await retry_forever("redis: trim latest alerts", self.trim)

    async def trim(self) -> None:
        """Keep the newest ``KEEP_LATEST_ALERTS`` alerts (zset and their JSON in the hash)."""
        k = self.keys
        old = await self.redis.zrange(k.latest_alerts, 0, -(KEEP_LATEST_ALERTS + 1))
        if old:
            pipe = self.redis.pipeline(transaction=True)
            pipe.zrem(k.latest_alerts, *old)
            pipe.hdel(k.alert_data, *old)
            await pipe.execute()


CasePublisher = Callable[[str, dict], Awaitable[Any]]


async def handle_enriched(raw: Any, table: MutableMapping[str, Any], store: CaseStore,
                          publish: CasePublisher) -> list[dict]:
    """Steps 1-3 of the module docstring for one enriched alert; returns the case versions sent."""
    try:
        alert = decode_alert(raw)
    except ContractError as exc:
        log.error("enriched alert breaks the contract, ignored: %s (%s)", exc, safe_excerpt(raw))
        return []
    card_id = alert["card_id"]
    state = table.get(card_id)
    if already_handled(state, alert):
        updates = current_versions(state)      # redelivery: re-do the idempotent effects
    else:
        table[card_id], updates = apply_to_card(state, alert)
    await store.save(alert, updates)
    for case in updates:
        await publish(card_id, case)
    return updates


# --- the Faust app: I/O only ------------------------------------------------------------------

settings = get_settings()
app = make_app(settings.cases_app_id, settings)
enriched_topic = app.topic(settings.topic_alerts_enriched, key_serializer="raw",
                           value_serializer="raw")
cases_topic = app.topic(settings.topic_cases, key_serializer="raw", value_serializer="raw")
card_cases = app.Table("card-cases", default=None, partitions=settings.partitions_alerts,
                       key_type=str)  # values: JSON (the app default value_serializer)
_store: CaseStore | None = None


def store() -> CaseStore:
    global _store
    if _store is None:
        _store = CaseStore(redis_client(settings), RedisKeys(settings.sinks_namespace))
    return _store


async def publish_case(card_id: str, case: dict) -> None:
    # Not awaited to the broker's ack: Faust flushes its producer before committing the offset.
    await cases_topic.send(key=card_id.encode(), value=json_bytes(case))


@app.agent(enriched_topic)
async def manage_cases(stream):
    async for value in stream:
        try:
            await handle_enriched(value, card_cases, store(), publish_case)
        except Exception:
            exit_on_agent_error("case manager")


def main() -> None:
    run_cli(app, settings)


if __name__ == "__main__":
    sys.exit(run_command(main, "python -m services.cases"))
