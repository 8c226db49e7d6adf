"""sinks.dashboard: the summary (pure), its latency and case pages, what it reads from Redis, the
endpoint; and the Redis retry of the Faust services."""

import asyncio
import json

import pytest

from common.redis_keys import RedisKeys
from sinks.case_logic import apply_alert
from sinks.dashboard.app import load_summary, make_web_app
from sinks.dashboard.latency import alert_latency_ms, latency_figures
from sinks.dashboard.summary import CASES_PER_PAGE, MAX_CASES, case_page, percentile, summarize
from sinks.faust_support import retry_forever
from tests.builders import at, make_alert


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99


def test_summary_of_cases_alerts_and_minutes():
    case_a = apply_alert(None, make_alert("c1", ["t1"], score=0.96, event_s=0))
    case_b = apply_alert(None, make_alert("c2", ["t2"], "velocity", score=0.3, event_s=60))
    alerts = [stored_alert(f"a{i}", "double_swipe", detected_s=i, ingested_s=i - 0.1 * i) for i in range(1, 6)]
    counts = {("202611221000", "double_swipe"): 3, ("202611221001", "velocity"): 2}
    out = summarize([case_a, case_b], 2, alerts, counts)
    assert [c["card_id"] for c in out["cases"]] == ["c2", "c1"]           # newest update first
    assert out["cases_by_severity"] == {"critical": 1, "low": 1} and out["open_cases"] == 2
    assert out["cases"][1]["reasons"] == ["double_swipe: double_swipe flagged 1 transactions"]
    assert [a["alert_id"] for a in out["latest_alerts"]][:2] == ["a5", "a4"]
    assert [a["latency_ms"] for a in out["latest_alerts"]] == [500, 400, 300, 200, 100]
    assert out["latency"]["overall"] == {"p50_ms": 300, "p99_ms": 500, "count": 5, "without": 0}
    assert out["alerts_by_detector"] == {"double_swipe": 3, "velocity": 2}
    assert out["alerts_per_minute"] == {"minutes": ["10:00", "10:01"],
                                        "minute_keys": ["202611221000", "202611221001"],
                                        "detectors": {"double_swipe": [3, 0], "velocity": [0, 2]}}


# --- latency: detected_at - ingested_at, per detector; never event time -------------------------

def stored_alert(alert_id: str, detector: str, detected_s: float, ingested_s: float | None,
                 event_s: float = -86_400 * 200) -> dict:
    """An alert as the case manager keeps it for the dashboard (``sinks.cases.alert_summary``); its
    event time is the simulator's, months before the wall clock."""
    return {"alert_id": alert_id, "detector": detector, "card_id": f"card-{alert_id}", "score": 0.9,
            "reason": "r", "event_time": at(event_s), "detected_at": at(detected_s),
            "ingested_at": None if ingested_s is None else at(ingested_s)}


def test_latency_is_from_entering_kafka_to_the_alert_per_detector_and_overall():
    alerts = ([stored_alert(f"v{i}", "velocity", detected_s=100 + i, ingested_s=100 + i - 0.2) for i in range(99)]
              + [stored_alert("v-slow", "velocity", detected_s=300, ingested_s=290)]
              + [stored_alert(f"d{i}", "double_swipe", detected_s=200 + i, ingested_s=200 + i - 2.5)
                 for i in range(3)])
    figures = latency_figures(alerts)
    assert figures["detectors"]["velocity"] == {"p50_ms": 200, "p99_ms": 200, "count": 100, "without": 0}
    assert figures["detectors"]["double_swipe"] == {"p50_ms": 2500, "p99_ms": 2500, "count": 3, "without": 0}
    assert figures["overall"] == {"p50_ms": 200, "p99_ms": 2500, "count": 103, "without": 0}
    out = summarize([], 0, alerts, {})
    assert out["latency"]["detectors"] == figures["detectors"] and out["latency"]["alerts"] == 103


def test_alerts_without_ingested_at_have_no_latency_and_event_time_is_never_used():
    old = stored_alert("old", "velocity", detected_s=10, ingested_s=None)        # an older writer
    old["latency_ms"] = 17_280_000_000        # what the case manager used to store: now minus event time
    new = stored_alert("new", "velocity", detected_s=20, ingested_s=19.25)
    assert alert_latency_ms(old) is None and alert_latency_ms(new) == 750
    assert alert_latency_ms({**new, "ingested_at": "yesterday"}) is None         # unreadable: no figure
    figures = latency_figures([old, new, stored_alert("lone", "double_swipe", detected_s=30, ingested_s=None)])
    assert figures["detectors"]["velocity"] == {"p50_ms": 750, "p99_ms": 750, "count": 1, "without": 1}
    assert figures["detectors"]["double_swipe"] == {"p50_ms": None, "p99_ms": None, "count": 0, "without": 1}
    assert figures["overall"] == {"p50_ms": 750, "p99_ms": 750, "count": 1, "without": 2}
    latest = {a["alert_id"]: a["latency_ms"] for a in summarize([], 0, [old, new], {})["latest_alerts"]}
    assert latest == {"old": None, "new": 750}
    assert summarize([], 0, [old], {})["latency"]["overall"]["p99_ms"] is None


def test_no_alerts_no_latency():
    assert summarize([], 0, [], {})["latency"] == {
        "overall": {"p50_ms": None, "p99_ms": None, "count": 0, "without": 0}, "detectors": {}, "alerts": 0}


# --- the open cases, a page at a time -------------------------------------------------------------

def test_case_pages_cover_every_open_case_once_and_clamp():
    pages = [case_page(134, n, 20) for n in range(1, 8)]
    assert [(p.offset, p.describe()["first"], p.describe()["last"]) for p in pages][::3] == \
        [(0, 1, 20), (60, 61, 80), (120, 121, 134)]
    assert {p.pages for p in pages} == {7}
    assert case_page(134, 99, 20).number == 7 and case_page(134, 0, 20).number == 1   # past the end / before 1
    assert case_page(134, 1, 10_000).size == MAX_CASES and case_page(134, 1, 0).size == 1
    assert case_page(0, 3, 20).describe() == {"page": 1, "per_page": 20, "pages": 1, "total": 0,
                                              "first": 0, "last": 0}
    assert case_page(134).describe()["per_page"] == MAX_CASES         # no parameters: the first 50


def test_summary_lists_one_page_of_cases_with_its_place_among_all():
    cases = [apply_alert(None, make_alert(f"c{i:03d}", [f"t{i}"], event_s=i)) for i in range(25)]
    out = summarize(cases[:20], 134, [], {}, page=case_page(134, 2, CASES_PER_PAGE))
    assert len(out["cases"]) == 20 and out["open_cases"] == 134
    assert out["cases_page"] == {"page": 2, "per_page": 20, "pages": 7, "total": 134, "first": 21, "last": 40}
    assert len(summarize(cases, 25, [], {}, page=case_page(25, 1, 10))["cases"]) == 10


class FakeRedis:
    """The few asyncio Redis calls the dashboard makes, over dicts (sorted sets as member -> score)."""

    def __init__(self, zsets=None, strings=None, hashes=None, sets=None):
        self.zsets, self.strings = zsets or {}, strings or {}
        self.hashes, self.sets = hashes or {}, sets or {}
        self.calls: list[tuple] = []

    def pipeline(self, transaction=False):
        return FakePipeline(self)

    def zrevrange(self, key, start, stop):
        self.calls.append(("zrevrange", key, start, stop))
        ordered = [m for m, _ in sorted(self.zsets.get(key, {}).items(), key=lambda kv: (kv[1], kv[0]),
                                        reverse=True)]
        return ordered[start:stop + 1 if stop >= 0 else None]

    def zcard(self, key):
        return len(self.zsets.get(key, {}))

    def hgetall(self, key):
        return dict(self.hashes.get(key, {}))

    def hmget(self, key, fields):
        return [self.hashes.get(key, {}).get(f) for f in fields]

    def scard(self, key):
        return len(self.sets.get(key, ()))

    def echo(self, value):
        return value

    async def mget(self, keys):
        return [self.strings.get(k) for k in keys]


class FakePipeline:
    def __init__(self, redis):
        self.redis, self.queued = redis, []

    def __getattr__(self, name):
        return lambda *args: self.queued.append(getattr(self.redis, name)(*args))

    async def execute(self):
        return self.queued


def fake_store(open_cases: int) -> tuple[FakeRedis, RedisKeys]:
    keys = RedisKeys("t")
    cases = [apply_alert(None, make_alert(f"c{i:03d}", [f"t{i}"], event_s=i, ingested_at=at(i + 0.5)))
             for i in range(open_cases)]
    alerts = [stored_alert(f"a{i}", "velocity", detected_s=i + 1, ingested_s=i + 0.5) for i in range(3)]
    redis = FakeRedis(
        zsets={keys.open_cases: {c["case_id"]: i for i, c in enumerate(cases)},
               keys.latest_alerts: {a["alert_id"]: i for i, a in enumerate(alerts)},
               keys.minutes: {"202611221000:velocity": 1}},
        strings={keys.case(c["case_id"]): json.dumps(c) for c in cases},
        hashes={keys.alert_data: {a["alert_id"]: json.dumps(a) for a in alerts},
                keys.queries: {"detector-velocity": json.dumps({"input_rows": 5000}),
                               "dlq": json.dumps({"input_rows": 5002, "offsets_behind_latest": 40})}},
        sets={keys.minute_set("202611221000", "velocity"): {"a0", "a1", "a2"}})
    return redis, keys


def test_load_summary_reads_only_the_requested_page_from_redis():
    redis, keys = fake_store(45)
    out = asyncio.run(load_summary(redis, keys, page=3, per_page=20))
    assert [c["card_id"] for c in out["cases"]] == [f"c{i:03d}" for i in range(4, -1, -1)]   # the oldest five
    assert ("zrevrange", keys.open_cases, 40, 59) in redis.calls
    assert out["cases_page"] == {"page": 3, "per_page": 20, "pages": 3, "total": 45, "first": 41, "last": 45}
    assert out["transactions"] == {"read": 5002, "offsets_behind_latest": 40}
    assert out["latency"]["detectors"]["velocity"]["p50_ms"] == 500
    assert out["alerts_by_detector"] == {"velocity": 3}
    first = asyncio.run(load_summary(redis, keys))             # no parameters: the newest MAX_CASES
    assert len(first["cases"]) == 45 and first["cases"][0]["card_id"] == "c044"


def test_the_summary_endpoint_takes_a_page_and_refuses_a_bad_one():
    from aiohttp.test_utils import TestClient, TestServer

    redis, keys = fake_store(30)

    async def aclose():
        pass
    redis.aclose = aclose

    async def scenario():
        async with TestClient(TestServer(make_web_app(redis, keys))) as client:
            page = await (await client.get("/api/summary?page=2&per_page=20")).json()
            bad = await client.get("/api/summary?page=two")
            html = await (await client.get("/")).text()
            return page, bad.status, await bad.json(), html

    page, bad_status, bad, html = asyncio.run(scenario())
    assert page["cases_page"]["first"] == 21 and len(page["cases"]) == 10
    assert bad_status == 400 and "page must be an integer" in bad["error"]
    # live figures first, the case table after them, a page at a time
    assert html.index('id="kpi-p99"') < html.index('id="detectors"') < html.index('id="cases"')
    assert f"const PER_PAGE = {CASES_PER_PAGE};" in html and "<script src" not in html and "http" not in \
        html.replace("http-equiv", "")


def test_summary_shows_each_querys_late_events_dropped_by_its_watermark():
    queries = {"detector-velocity": {"input_rows": 2000, "rows_dropped_by_watermark": 10, "invalid_records": 0,
                                     "watermark": "2026-11-22T10:05:00.000Z"},
               "dlq": {"input_rows": 0, "rows_dropped_by_watermark": 0, "invalid_records": 0, "watermark": None}}
    out = summarize([], 0, [], {}, queries)
    assert out["queries"] == [
        {"query": "detector-velocity", "input_rows": 2000, "rows_dropped_by_watermark": 10, "dropped_share": 0.005,
         "invalid_records": 0, "watermark": "2026-11-22T10:05:00.000Z", "offsets_behind_latest": None},
        {"query": "dlq", "input_rows": 0, "rows_dropped_by_watermark": 0, "dropped_share": None,
         "invalid_records": 0, "watermark": None, "offsets_behind_latest": None},
    ]
    # every query reads the whole topic: the furthest one's rows read; no lag unless the job publishes it
    assert out["transactions"] == {"read": 2000, "offsets_behind_latest": None}
    assert summarize([], 0, [], {})["queries"] == []      # no detector job has reported yet
    assert summarize([], 0, [], {})["transactions"] == {"read": None, "offsets_behind_latest": None}


def test_redis_down_is_retried_with_exponential_backoff_until_it_is_back():
    import redis.exceptions

    calls, pauses = [], []

    async def flaky():
        calls.append(1)
        if len(calls) < 6:
            raise redis.exceptions.ConnectionError("connection refused")
        return "ok"

    async def record_pause(seconds):  # instead of waiting
        pauses.append(seconds)

    assert asyncio.run(retry_forever("test", flaky, first_delay=0.1, max_delay=1.0,
                                     sleep=record_pause)) == "ok"
    assert pauses == [0.1, 0.2, 0.4, 0.8, 1.0]


def test_other_errors_are_not_retried():
    async def broken():
        raise KeyError("bug")

    with pytest.raises(KeyError):
        asyncio.run(retry_forever("test", broken))


def test_a_wrong_redis_password_is_not_retried():
    import redis.exceptions

    calls = []

    async def refused():
        calls.append(1)
        raise redis.exceptions.AuthenticationError("invalid username-password pair")

    with pytest.raises(redis.exceptions.AuthenticationError):
        asyncio.run(retry_forever("test", refused))
    assert len(calls) == 1
