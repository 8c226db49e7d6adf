"""The Faust agents with ``agent.test_context()``: no broker, no Redis (in-memory fakes)."""

import asyncio
import json

import pytest

from sinks import cases, enricher
from sinks.enrichment import enrich
from common.redis_keys import RedisKeys
from tests.builders import BASE_TIME, make_alert


class FakeContextStore:
    """The enricher's Redis port in memory."""

    def __init__(self):
        self.seen: set[str] = set()
        self.card_alerts: dict[str, set[str]] = {}
        self.profiles = {"card": {"c1": {"customer_id": "cu1", "status": "active"}},
                         "customer": {"cu1": {"segment": "premium", "home_lat": "0", "home_lon": "0"}},
                         "merchant": {"m1": {"name": "Bakery", "category": "food", "lat": "0",
                                             "lon": "1"}}}

    async def already_enriched(self, ids):
        return {i for i in ids if i in self.seen}

    async def contexts(self, alerts):
        out = []
        for a in alerts:
            self.card_alerts.setdefault(a["card_id"], set()).add(a["alert_id"])
            card = self.profiles["card"].get(a["card_id"], {})
            out.append((self.profiles["customer"].get(card.get("customer_id"), {}), card,
                        self.profiles["merchant"].get(a.get("merchant_id"), {}),
                        len(self.card_alerts[a["card_id"]])))
        return out

    async def mark_enriched(self, ids):
        self.seen.update(ids)


@pytest.fixture
def enricher_io(monkeypatch):
    store, sent = FakeContextStore(), []

    async def publish(records):
        sent.extend(records)

    monkeypatch.setattr(enricher, "_store", store)
    monkeypatch.setattr(enricher, "publish_enriched", publish)
    return store, sent


def test_enricher_agent_enriches_and_drops_duplicates(enricher_io):
    store, sent = enricher_io
    a1 = make_alert("c1", ["t1", "t2"], merchant_id="m1")
    a2 = make_alert("c1", ["t3"], "velocity", event_s=5)

    async def scenario():
        async with enricher.enrich_alerts.test_context() as agent:
            for alert in (a1, a2, a1):
                await agent.put(json.dumps(alert).encode())
            await agent.put(b"not json")
    asyncio.run(scenario())
    assert [key for key, _ in sent] == ["c1", "c1"]
    first, second = (value for _, value in sent)
    assert first["alert_id"] == a1["alert_id"] and second["alert_id"] == a2["alert_id"]
    assert first["enrichment"]["merchant_name"] == "Bakery"
    assert first["enrichment"]["distance_from_home_km"] == pytest.approx(111.2, abs=0.1)
    assert second["profile_missing"] == ["merchant"] and second["enrichment"]["card_recent_alerts"] == 2
    assert store.seen == {a1["alert_id"], a2["alert_id"]}


def test_process_batch_sets_dedup_keys_only_after_publishing():
    store, order = FakeContextStore(), []

    async def failing_publish(records):
        order.append("publish")
        raise RuntimeError("broker gone")

    alert = make_alert("c1", ["t1"])
    with pytest.raises(RuntimeError):
        asyncio.run(enricher.process_batch([json.dumps(alert)], store, failing_publish, BASE_TIME))
    assert order == ["publish"] and store.seen == set()   # redelivery will enrich it again


class FakeCaseStore:
    def __init__(self):
        self.saved = []

    async def save(self, alert, updates):
        self.saved.append((alert["alert_id"], [c["version"] for c in updates]))


def test_case_agent_groups_alerts_and_is_idempotent(monkeypatch):
    store, sent = FakeCaseStore(), []

    async def publish(card_id, case):
        sent.append((card_id, case))

    table: dict = {}
    monkeypatch.setattr(cases, "_store", store)
    monkeypatch.setattr(cases, "publish_case", publish)
    monkeypatch.setattr(cases, "card_cases", table)   # the Faust table is a mapping to the logic
    alerts = [enrich(make_alert("c1", ["t1"], d, score=0.6), {}, {}, {}, 1, BASE_TIME)
              for d in ("double_swipe", "velocity")]
    two_days_later = enrich(make_alert("c1", ["t9"], event_s=2 * 86400), {}, {}, {}, 1, BASE_TIME)

    async def scenario():
        async with cases.manage_cases.test_context() as agent:
            for alert in alerts + alerts[:1] + [two_days_later] + alerts[:1]:
                await agent.put(json.dumps(alert).encode())
    asyncio.run(scenario())
    assert [(k, c["status"], c["version"], c["alert_count"]) for k, c in sent] == [
        ("c1", "open", 1, 1), ("c1", "open", 2, 2),
        ("c1", "open", 2, 2),                                 # a redelivery republishes, unchanged
        ("c1", "closed", 3, 2), ("c1", "open", 1, 1),         # two days later: closed, a new case
        ("c1", "closed", 3, 2), ("c1", "open", 1, 1)]         # a redelivery now: both, closed first
    assert table["c1"]["previous_case"]["detectors"] == ["double_swipe", "velocity"]
    assert table["c1"]["previous_case"]["score"] == pytest.approx(0.84)


def test_redis_keys_are_namespaced():
    keys = RedisKeys("t42")
    assert keys.seen("enricher", "a1") == "t42:seen:enricher:a1"
    assert keys.case("x") == "t42:case:x" and keys.open_cases == "t42:cases:open"


def test_an_agent_error_ends_the_worker_so_the_event_is_redelivered():
    """Faust would restart the agent and acknowledge the failed event; ours exits without doing so."""
    import subprocess
    import sys

    from common.settings import REPO_ROOT
    from sinks.faust_support import EXIT_AGENT_FAILED

    code = ("from sinks.faust_support import exit_on_agent_error\n"
            "try:\n    raise RuntimeError('boom')\nexcept Exception:\n    exit_on_agent_error('the test agent')\n"
            "print('not reached')\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == EXIT_AGENT_FAILED
    assert "the test agent failed" in result.stderr and "RuntimeError: boom" in result.stderr
    assert "not reached" not in result.stdout


def test_a_failed_publish_sends_again_only_the_records_not_delivered():
    """The enricher resends the records whose delivery failed, not the whole batch: a batch resent whole
    duplicated the alerts already acknowledged (a compose run without faults once showed 11)."""
    from aiokafka.errors import KafkaTimeoutError

    from sinks.faust_support import retry_forever

    attempts: list[str] = []

    async def send(key, value):
        attempts.append(value["id"])
        future = asyncio.get_running_loop().create_future()
        if value["id"] == "b" and attempts.count("b") == 1:
            future.set_exception(KafkaTimeoutError())
        else:
            future.set_result(None)
        return future

    async def no_wait(_seconds):
        return None

    records = [("c1", {"id": "a"}), ("c2", {"id": "b"}), ("c3", {"id": "c"})]
    asyncio.run(enricher.resend_failed(records, send, retry=lambda op: retry_forever(
        "publish", op, retry_on=(KafkaTimeoutError,), sleep=no_wait)))
    assert attempts == ["a", "b", "c", "b"]


def test_the_services_producer_is_idempotent():
    """Faust's at-least-once producer, as the services build it, has Kafka's idempotence on (its retries
    cannot duplicate a record); nothing connects until it starts."""
    async def build():
        producer = enricher.app.producer._new_producer()
        try:
            return producer._txn_manager is not None
        finally:
            await producer.stop()

    assert asyncio.run(build())
