"""Case manager: ``alerts.enriched`` -> cases per card (Faust table + changelog) -> ``cases`` and Redis.

Run: ``python -m sinks.cases worker -l info`` (app id / consumer group from ``FRAUD_CASES_APP_ID``).

State: the table ``card-cases`` maps card_id to ``{"case": open case, "previous_case": closed case}``
(``sinks.case_logic.apply_to_card``); its changelog topic ``{app_id}-card-cases-changelog``
(compacted, created by Faust with the alert topics' partition count and replication from the
settings) rebuilds it on restart, so cases survive restarts and rebalances. The card's source
partition is kept in its state: a card with no alert for 7 days of event time is forgotten
(``forget_cards``: its open case closed, then ``del table[card]``, a tombstone in the changelog), so
the table and its restore time stay bounded.

Redis is a view the table can rebuild: every few seconds (``keep_redis_whole``) the worker asks
whether this Redis process (its ``run_id``) holds its partitions' cases; after a restart, with or
without the data, or a flush, it writes back every card's open and last closed case and their
alerts' dashboard records. Open cases have no TTL in Redis and leave ``cases:open`` when closed.

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

import asyncio
import inspect
import itertools
import json
import logging
import sys
import time
from datetime import datetime, timedelta
from typing import Any, Awaitable, Callable, Iterable, Mapping, MutableMapping

from common.card_numbers import safe_excerpt
from common.cli_errors import run_command
from common.contracts import ContractError, parse_event_time
from common.kafka_io import json_bytes
from common.settings import get_settings
from sinks.case_logic import (CARD_RETENTION, already_handled, apply_to_card, current_versions, forget_card,
                                 forgotten)
from sinks import metrics
from sinks.dashboard.latency import alert_latency_ms
from sinks.enrichment import decode_alert
from sinks.faust_support import (exit_on_agent_error, main as run_cli, make_app, redis_client, redis_errors,
                                    retry_forever)
from common.redis_keys import KEEP_CLOSED_CASES, KEEP_LATEST_ALERTS, RedisKeys

log = logging.getLogger(__name__)

CLOSED_CASE_TTL_SECONDS = 7 * 24 * 3600  # open cases have no TTL: they leave Redis when the case manager closes them
MINUTE_TTL_SECONDS = 2 * 24 * 3600
TRIM_EVERY = 200
SWEEP_EVERY = timedelta(hours=6)         # of a partition's event time: how often its forgotten cards are looked for
RESTORE_CHUNK = 200                      # cards per MULTI/EXEC when Redis is rebuilt
REDIS_CHECK_S = 5.0                      # how often the case manager checks that Redis still has its cases
SERVICE = "cases"                        # its label in the metrics (docs/metrics.md)


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


def entry_summary(case: dict, entry: dict) -> dict:
    """``alert_summary`` of one of ``case``'s alert entries (what Redis gets back after a loss)."""
    return {
        "alert_id": entry["alert_id"], "detector": entry["detector"], "card_id": case["card_id"],
        "score": entry["score"], "reason": entry["reason"], "event_time": entry["event_time"],
        "detected_at": entry["detected_at"], "ingested_at": entry.get("ingested_at"),
        "merchant_name": entry.get("merchant_name"), "segment": case.get("segment"),
        "distance_from_home_km": entry.get("distance_from_home_km"),
        "profile_missing": case.get("profile_missing") or [], "case_id": case["case_id"],
    }


class CaseStore:
    """The case manager's Redis I/O: current cases and the dashboard's alert records.

    ``clock`` (epoch seconds) only decides which minutes are too old to write back in ``restore``."""

    def __init__(self, redis, keys: RedisKeys, clock: Callable[[], float] = time.time):
        self.redis = redis
        self.keys = keys
        self.clock = clock
        self._writes = 0

    def _write_cases(self, pipe, cases: list[dict]) -> None:
        k = self.keys
        for case in cases:
            updated = epoch_ms(case["updated_at"])
            if case["status"] == "open":
                pipe.set(k.case(case["case_id"]), json.dumps(case))
                pipe.zadd(k.open_cases, {case["case_id"]: updated})
            else:
                pipe.set(k.case(case["case_id"]), json.dumps(case), ex=CLOSED_CASE_TTL_SECONDS)
                pipe.zrem(k.open_cases, case["case_id"])
                pipe.zadd(k.closed_cases, {case["case_id"]: updated})
                pipe.zremrangebyrank(k.closed_cases, 0, -(KEEP_CLOSED_CASES + 1))

    def _write_alert(self, pipe, summary: dict, latest: bool = True, minutes: bool = True) -> None:
        k = self.keys
        minute = summary["detected_at"][:16]                    # 2026-11-22T10:15
        minute_ms = epoch_ms(minute + ":00.000Z")
        minute_tag = minute.replace("-", "").replace("T", "").replace(":", "")
        if latest:
            pipe.zadd(k.latest_alerts, {summary["alert_id"]: epoch_ms(summary["detected_at"])})
            pipe.hset(k.alert_data, summary["alert_id"], json.dumps(summary))
        if not minutes:
            return
        minute_set = k.minute_set(minute_tag, summary["detector"])
        pipe.sadd(minute_set, summary["alert_id"])
        pipe.expire(minute_set, MINUTE_TTL_SECONDS)
        pipe.zadd(k.minutes, {f"{minute_tag}:{summary['detector']}": minute_ms})
        pipe.zremrangebyscore(k.minutes, "-inf", minute_ms - MINUTE_TTL_SECONDS * 1000)

    async def save(self, alert: dict, cases: list[dict]) -> None:
        current = next((c["case_id"] for c in reversed(cases) if alert["alert_id"] in c["alert_ids"]),
                       cases[-1]["case_id"] if cases else None)

        async def op():
            pipe = self.redis.pipeline(transaction=True)
            self._write_cases(pipe, cases)
            self._write_alert(pipe, alert_summary(alert, current))
            await pipe.execute()
        await retry_forever("redis: save case", op)
        self._writes += 1
        if self._writes % TRIM_EVERY == 0:
            await retry_forever("redis: trim latest alerts", self.trim)

    async def save_cases(self, cases: list[dict]) -> None:
        """Case versions without an alert (a forgotten card's closed case)."""
        async def op():
            pipe = self.redis.pipeline(transaction=True)
            self._write_cases(pipe, cases)
            await pipe.execute()
        if cases:
            await retry_forever("redis: save cases", op)

    async def trim(self) -> None:
        """Keep the newest ``KEEP_LATEST_ALERTS`` alerts (zset and their JSON in the hash)."""
        k = self.keys
        old = await self.redis.zrange(k.latest_alerts, 0, -(KEEP_LATEST_ALERTS + 1))
        if old:
            pipe = self.redis.pipeline(transaction=True)
            pipe.zrem(k.latest_alerts, *old)
            pipe.hdel(k.alert_data, *old)
            await pipe.execute()

    async def unrestored(self, partitions: Iterable[int]) -> set[int]:
        """The partitions whose cases this Redis may not hold: not marked restored by this very Redis
        process (``RedisKeys.restored_partitions`` maps a partition to the ``run_id`` of the Redis it
        was restored to). A Redis restarted has a new run_id, so a restart without its data, one that
        lost its last second of writes (SIGKILL before the append-only file's fsync), or a flush (the
        marks are gone) all count."""
        partitions = sorted(set(partitions))
        if not partitions:
            return set()
        run_id = await self.run_id()
        marks = await self.redis.hmget(self.keys.restored_partitions, [str(p) for p in partitions])
        return {p for p, mark in zip(partitions, marks) if mark != run_id}

    async def run_id(self) -> str:
        return (await self.redis.info("server"))["run_id"]

    async def restore(self, states: Iterable[Mapping[str, Any]], partitions: Iterable[int]) -> int:
        """Write back what the table holds of ``partitions``' cards (each card's open case and its last
        closed one, their alerts' dashboard records), then mark the partitions restored to this Redis.
        Returns the cases written. Idempotent: every write is a SET/ZADD/SADD/HSET of what the table
        says. Older closed cases are not in the table: they stay on the ``cases`` topic."""
        partitions = set(partitions)
        run_id = await self.run_id()           # before the writes: a restart during them is noticed next time
        mine = [s for s in states if s and s.get("partition") in partitions]
        oldest_minute_ms = (self.clock() - MINUTE_TTL_SECONDS) * 1000
        entries = [(case, entry) for s in mine for case in current_versions(s) for entry in case["alerts"]]
        newest = {entry["alert_id"] for _case, entry in
                  sorted(entries, key=lambda ce: ce[1]["detected_at"], reverse=True)[:KEEP_LATEST_ALERTS]}
        written = 0
        for start in range(0, max(len(mine), len(entries)), RESTORE_CHUNK):
            pipe = self.redis.pipeline(transaction=True)
            chunk = [case for s in mine[start:start + RESTORE_CHUNK] for case in current_versions(s)]
            self._write_cases(pipe, chunk)
            written += len(chunk)
            for case, entry in entries[start:start + RESTORE_CHUNK]:
                latest, minutes = entry["alert_id"] in newest, epoch_ms(entry["detected_at"]) >= oldest_minute_ms
                if latest or minutes:      # a minute older than its TTL would only be trimmed again
                    self._write_alert(pipe, entry_summary(case, entry), latest, minutes)
            await pipe.execute()
        if partitions:
            await self.redis.hset(self.keys.restored_partitions, mapping={str(p): run_id for p in partitions})
        return written

    async def open_count(self) -> int:
        return int(await self.redis.zcard(self.keys.open_cases))

    async def drop_vanished_open_cases(self) -> int:
        """Remove from ``cases:open`` the members whose case JSON is gone (written with a TTL by an older
        version, or deleted by hand), so the dashboard's open-case count is what it can show."""
        k = self.keys
        members = await self.redis.zrange(k.open_cases, 0, -1)
        vanished: list[str] = []
        for start in range(0, len(members), 500):
            chunk = members[start:start + 500]
            pipe = self.redis.pipeline(transaction=False)
            for case_id in chunk:
                pipe.exists(k.case(case_id))
            vanished += [c for c, there in zip(chunk, await pipe.execute()) if not there]
        if vanished:
            await self.redis.zrem(k.open_cases, *vanished)
        return len(vanished)


CasePublisher = Callable[..., Awaitable[Any]]


class CardSweep:
    """When to look for forgotten cards: per partition, once its event time moved ``SWEEP_EVERY``."""

    def __init__(self, every: timedelta = SWEEP_EVERY):
        self.every = every
        self.last: dict[int, datetime] = {}

    def due(self, partition: int, now: datetime) -> bool:
        last = self.last.get(partition)
        if last is not None and now - last < self.every:
            return False
        self.last[partition] = now
        return True


async def forget_cards(table: MutableMapping[str, Any], partition: int, now: datetime, store: CaseStore,
                       publish: CasePublisher) -> list[str]:
    """Delete the cards of ``partition`` with no alert for ``CARD_RETENTION`` at ``now`` (event time).

    Must run while an event of ``partition`` is in hand: a Faust table sends the deletion's tombstone to
    the changelog partition of the current event, so only that partition's cards may be deleted (the
    partition is in each card's state). Their open cases are closed in Redis and on ``cases``, and
    acknowledged by the broker, before the tombstones: a crash in between leaves the card to be
    forgotten again, never a case open for good."""
    cards = [(card, state) for card, state in list(table.items())
             if state and state.get("partition") == partition and forgotten(state, now)]
    if not cards:
        return []
    closing = [(card, case) for card, state in cards for case in forget_card(state)]
    await store.save_cases([case for _card, case in closing])
    pending = [await publish(card, case) for card, case in closing]
    for sent in pending:
        if inspect.isawaitable(sent):
            await sent                       # the broker's ack
    for card, _state in cards:
        del table[card]
    return [card for card, _state in cards]


async def handle_enriched(raw: Any, table: MutableMapping[str, Any], store: CaseStore,
                          publish: CasePublisher, partition: int = 0,
                          sweep: CardSweep | None = None) -> list[dict]:
    """Steps 1-3 of the module docstring for one enriched alert (of ``partition``), then the partition's
    forgotten cards (``forget_cards``) when ``sweep`` says it is time; returns the case versions sent
    for the alert."""
    metrics.RECORDS.labels(SERVICE).inc()
    try:
        alert = decode_alert(raw)
    except ContractError as exc:
        metrics.INVALID.labels(SERVICE).inc()
        log.error("enriched alert breaks the contract, ignored: %s (%s)", exc, safe_excerpt(raw))
        return []
    card_id = alert["card_id"]
    state = table.get(card_id)
    if already_handled(state, alert):
        metrics.DEDUPE_HITS.labels(SERVICE).inc()
        updates = current_versions(state)      # redelivery: re-do the idempotent effects
    else:
        new_state, updates = apply_to_card(state, alert)
        table[card_id] = {**new_state, "partition": partition}   # which cards a sweep of the partition may delete
        latency_ms = alert_latency_ms(alert)
        if latency_ms is not None:
            metrics.LATENCY.labels(alert["detector"]).observe(latency_ms / 1000)
    await store.save(alert, updates)
    for case in updates:
        await publish(card_id, case)
    metrics.PUBLISHED.labels(SERVICE).inc(len(updates))
    now = parse_event_time(alert["event_time"])
    if sweep is not None and sweep.due(partition, now):
        forgotten_cards = await forget_cards(table, partition, now, store, publish)
        if forgotten_cards:
            log.info("partition %d: %d cards forgotten (no alert for %s of event time)", partition,
                     len(forgotten_cards), CARD_RETENTION)
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


async def publish_case(card_id: str, case: dict):
    # Not awaited to the broker's ack: Faust flushes its producer before committing the offset. The
    # returned future is the ack, for who needs it (``forget_cards``).
    return await cases_topic.send(key=card_id.encode(), value=json_bytes(case))


# The agent and the Redis check take turns: a restore must not write back a case version older than
# one the agent wrote meanwhile.
_turns = asyncio.Lock()
_sweep = CardSweep()
_checks = itertools.count(1)


@app.agent(enriched_topic)
async def manage_cases(stream):
    async for value in stream:
        event = stream.current_event
        try:
            async with _turns:
                await handle_enriched(value, card_cases, store(), publish_case,
                                      event.message.partition if event is not None else 0, _sweep)
        except Exception:
            exit_on_agent_error("case manager")


def assigned_partitions() -> set[int]:
    return {tp.partition for tp in app.consumer.assignment() if tp.topic == settings.topic_alerts_enriched}


@app.timer(interval=REDIS_CHECK_S)
async def keep_redis_whole() -> None:
    """Rebuild in Redis what it lost (a restart without its data, a flush) from the table, for the
    partitions this worker owns; now and then drop open-case members whose JSON is gone."""
    if app.rebalancing or not app.tables.recovery.completed.is_set():
        return                      # the table is not whole yet: restoring from it would mark too little
    try:
        async with _turns:
            lost = await store().unrestored(assigned_partitions())
            if lost:
                written = await store().restore(list(card_cases.values()), lost)
                log.warning("Redis had lost the cases of partitions %s: %d cases written back from the table",
                            sorted(lost), written)
            if next(_checks) % 60 == 0:     # every 5 min: a full scan of cases:open
                await store().drop_vanished_open_cases()
            metrics.OPEN_CASES.set(await store().open_count())
    except redis_errors() as exc:   # Redis away: the next tick tries again
        metrics.redis_failed()
        log.warning("redis: cannot check the cases (%s); trying again in %.0f s", exc, REDIS_CHECK_S)


metrics.install(app, SERVICE, settings.topic_alerts_enriched)


def main() -> None:
    run_cli(app, settings, lambda: metrics.serve(settings, SERVICE, settings.cases_metrics_port))


if __name__ == "__main__":
    sys.exit(run_command(main, "python -m sinks.cases"))
