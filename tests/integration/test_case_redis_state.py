"""The case manager's state over simulated days and after Redis lost its data, on the real broker and
Redis, the worker run as in production (``python -m sinks.cases worker``)."""

from __future__ import annotations

import json

from common.kafka_io import json_bytes, read_topic
from common.waiting import wait_until
from tests.builders import make_alert
from tests.integration.test_faust_services import Pipeline

DAY = 86400.0


def redis_cases(redis_sync, namespace: str) -> dict[str, dict]:
    """Every case JSON of the namespace, by case id."""
    keys = list(redis_sync.scan_iter(match=f"{namespace}:case:*", count=1000))
    return {json.loads(v)["case_id"]: json.loads(v) for v in (redis_sync.mget(keys) if keys else []) if v}


def test_idle_cards_are_forgotten_and_redis_is_rebuilt_after_a_loss(stack, redis_sync, tmp_path):
    """Day 0: 30 cards alerted; day 2: 10 of them again (their first case closes, a second opens); day 9,
    day 10: 30 new cards (so every partition's event time passes 7 days after day 2). The cards idle
    since day 2 are forgotten (a tombstone in the table's changelog, their open case closed); then every
    key of the namespace is deleted, as a Redis restarted without its data, and the worker must write
    back what its table holds: Redis agrees with the cases topic again."""
    p = Pipeline(stack, tmp_path, "s")
    try:
        old = [f"card-{p.tag}-old-{n}" for n in range(30)]
        new = [f"card-{p.tag}-new-{n}" for n in range(30)]
        alerts = [make_alert(card, [f"{card}-t0"], event_s=0) for card in old]
        alerts += [make_alert(card, [f"{card}-t1"], "velocity", event_s=2 * DAY) for card in old[:10]]
        alerts += [make_alert(card, [f"{card}-t{d}"], event_s=d * DAY) for d in (9, 10) for card in new]
        for alert in alerts:                     # straight to the case manager's input: no enricher here
            p.producer.send(p.settings.topic_alerts_enriched, key=alert["card_id"], value=json_bytes(alert))
        p.producer.flush()
        cases = p.service("cases", "sinks.cases", "worker", "-l", "info").start()
        ns = p.namespace

        def topic_cases() -> dict[str, dict]:
            cases.assert_alive()
            return p.latest_cases()

        def settled():
            latest = topic_cases()
            open_cards = {c["card_id"] for c in latest.values() if c["status"] == "open"}
            # The day-9 alerts alone already close the old cards and open the new ones: wait for day 10's
            # versions too, or Redis (which has them) and this snapshot of the topic differ for good.
            both_days = all(len(c["alerts"]) == 2 for c in latest.values() if c["card_id"] in new)
            return latest if open_cards == set(new) and len(latest) == 30 + 10 + 30 and both_days else None
        latest = wait_until(settled, 240, "the old cards' cases closed, the new cards' open", interval=1.0)
        closed = [c for c in latest.values() if c["status"] == "closed"]
        assert sum(c["closed_reason"].startswith("no alert for the card within 7 days") for c in closed) == 30
        changelog = f"{p.env['FRAUD_CASES_APP_ID']}-card-cases-changelog"
        tombstones = {r.key.decode().strip('"') for r in read_topic(p.settings, changelog, timeout=120) if r.value is None}
        assert tombstones == set(old)

        differences: dict = {}

        def redis_agrees() -> bool:
            cases.assert_alive()
            stored = redis_cases(redis_sync, ns)
            open_ids = set(redis_sync.zrange(f"{ns}:cases:open", 0, -1))
            current = {cid: c for cid, c in latest.items() if c["card_id"] in new}
            differences.update(   # what a failure names
                open_not_on_topic=sorted(open_ids - set(current)), on_topic_not_open=sorted(set(current) - open_ids),
                versions={cid: (stored.get(cid, {}).get("version"), c["version"]) for cid, c in current.items()
                          if stored.get(cid, {}).get("version") != c["version"]})
            return not any(differences.values())

        try:
            wait_until(redis_agrees, 60, "Redis to hold the open cases of the topic", interval=0.5)
        except TimeoutError as error:
            raise AssertionError(f"{error}; Redis vs the topic (versions: Redis, topic): {differences}") from None
        assert redis_sync.ttl(f"{ns}:case:{next(iter(c['case_id'] for c in closed))}") > 0
        assert all(redis_sync.ttl(f"{ns}:case:{c['case_id']}") == -1 for c in latest.values() if c["status"] == "open")

        for key in redis_sync.scan_iter(match=f"{ns}:*", count=1000):      # Redis lost everything
            redis_sync.delete(key)
        wait_until(redis_agrees, 60, "the case manager to write its cases back", interval=0.5)
        assert len(redis_sync.zrange(f"{ns}:alerts:latest", 0, -1)) == 60   # the new cards' alerts, for the dashboard
    finally:
        p.close(redis_sync)
