"""services.dashboard.summary (pure) and the Redis retry of the Faust services."""

import asyncio

import pytest

from services.case_logic import apply_alert
from services.dashboard.summary import percentile, summarize
from services.faust_support import retry_forever
from tests.builders import make_alert


def test_percentile_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    values = list(range(1, 101))
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99


def test_summary_of_cases_alerts_and_minutes():
    case_a = apply_alert(None, make_alert("c1", ["t1"], score=0.96, event_s=0))
    case_b = apply_alert(None, make_alert("c2", ["t2"], "velocity", score=0.3, event_s=60))
    alerts = [{"alert_id": f"a{i}", "detected_at": f"2026-11-22T10:00:0{i}.000Z", "latency_ms": 100 * i}
              for i in range(1, 6)]
    counts = {("202611221000", "double_swipe"): 3, ("202611221001", "velocity"): 2}
    out = summarize([case_a, case_b], 2, alerts, counts)
    assert [c["card_id"] for c in out["cases"]] == ["c2", "c1"]           # newest update first
    assert out["cases_by_severity"] == {"critical": 1, "low": 1} and out["open_cases"] == 2
    assert out["cases"][1]["reasons"] == ["double_swipe: double_swipe flagged 1 transactions"]
    assert [a["alert_id"] for a in out["latest_alerts"]][:2] == ["a5", "a4"]
    assert out["latency_ms"] == {"p50": 300.0, "p99": 500.0, "count": 5}
    assert out["alerts_per_minute"] == {"minutes": ["10:00", "10:01"],
                                        "minute_keys": ["202611221000", "202611221001"],
                                        "detectors": {"double_swipe": [3, 0], "velocity": [0, 2]}}


def test_summary_shows_each_querys_late_events_dropped_by_its_watermark():
    queries = {"detector-velocity": {"input_rows": 2000, "rows_dropped_by_watermark": 10, "invalid_records": 0,
                                     "watermark": "2026-11-22T10:05:00.000Z"},
               "dlq": {"input_rows": 0, "rows_dropped_by_watermark": 0, "invalid_records": 0, "watermark": None}}
    out = summarize([], 0, [], {}, queries)
    assert out["queries"] == [
        {"query": "detector-velocity", "input_rows": 2000, "rows_dropped_by_watermark": 10, "dropped_share": 0.005,
         "invalid_records": 0, "watermark": "2026-11-22T10:05:00.000Z"},
        {"query": "dlq", "input_rows": 0, "rows_dropped_by_watermark": 0, "dropped_share": None,
         "invalid_records": 0, "watermark": None},
    ]
    assert summarize([], 0, [], {})["queries"] == []      # no detector job has reported yet


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
