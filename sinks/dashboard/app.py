"""The live dashboard: one HTML page and ``/api/summary``, served by aiohttp.

Where the data comes from: Redis only, as written by the case manager (``sinks/cases.py``; keys in
``common/redis_keys.py``) and, for the transactions read and the late-events table, by the detector
job's progress listener. The case manager sees every enriched alert once in effect (its writes are
idempotent on alert_id), so the counts shown are exact even when alerts are redelivered; the
dashboard itself holds no state and any number of them can run; it touches Kafka only to publish an
analyst's verdict on a case (``verdicts.py``).

The page polls ``/api/summary?page=P&per_page=20`` every second and redraws itself without a reload
(without parameters: the first 50 open cases). No external resources: the page, its CSS and its JS are
inline. Only requests naming the dashboard by an allowed host are answered (``hosts.py``: DNS rebinding).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Iterable

from aiohttp import web

from sinks.dashboard.hosts import LOOPBACK_NAMES, host_check
from sinks.dashboard.page import PAGE
from sinks.dashboard.summary import MAX_CASES, case_page, summarize
from common.verdicts import precision_by_detector
from sinks.dashboard.verdicts import Publish, verdict_handler
from common.redis_keys import KEEP_LATEST_ALERTS, RedisKeys

log = logging.getLogger(__name__)


async def load_summary(redis, keys: RedisKeys, page: int = 1, per_page: int = MAX_CASES) -> dict:
    """One page of the open cases (``page``, ``per_page``: see ``summary.case_page``) and the rest."""
    pipe = redis.pipeline(transaction=False)
    pipe.zcard(keys.open_cases)
    pipe.zrevrange(keys.latest_alerts, 0, KEEP_LATEST_ALERTS - 1)
    pipe.zrevrange(keys.minutes, 0, 499)
    pipe.hgetall(keys.queries)
    pipe.hgetall(keys.params)
    pipe.hgetall(keys.verdicts)
    open_count, alert_ids, minute_members, queries, params, all_verdicts = await pipe.execute()
    shown = case_page(int(open_count), page, per_page)
    pipe = redis.pipeline(transaction=False)
    pipe.zrevrange(keys.open_cases, shown.offset, shown.offset + shown.size - 1)
    if alert_ids:
        pipe.hmget(keys.alert_data, alert_ids)
    else:
        pipe.echo("")  # placeholder: keeps the reply positions fixed
    pairs = [tuple(member.split(":", 1)) for member in minute_members]
    for minute, detector in pairs:
        pipe.scard(keys.minute_set(minute, detector))
    replies = await pipe.execute()
    case_ids = replies[0]
    alerts = [json.loads(a) for a in (replies[1] if alert_ids else []) if a]
    counts = {pair: int(n) for pair, n in zip(pairs, replies[2:])}
    cases = [json.loads(c) for c in (await redis.mget([keys.case(c) for c in case_ids]) if case_ids else []) if c]
    verdicts = []
    if cases:
        pipe = redis.pipeline(transaction=False)
        pipe.hmget(keys.verdicts, [c["case_id"] for c in cases])
        (verdicts,) = await pipe.execute()
    data = summarize(cases, int(open_count), alerts, counts,
                     {name: json.loads(value) for name, value in queries.items()}, shown)
    # the analyst's loop: each detector's parameters in force, each case's verdict (verdicts.py)
    data["params"] = {name: json.loads(value) for name, value in sorted(params.items())}
    data["verdicts"] = {c["case_id"]: json.loads(v) for c, v in zip(cases, verdicts) if v}
    # each detector's precision against the analysts' verdicts (every judged case, open or closed)
    data["precision_by_verdicts"] = precision_by_detector(json.loads(v) for v in all_verdicts.values())
    return data


def _int_parameter(request: web.Request, name: str, default: int) -> int:
    value = request.query.get(name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise web.HTTPBadRequest(text=json.dumps({"error": f"{name} must be an integer, got {value[:20]!r}"}),
                                 content_type="application/json") from None


def make_web_app(redis, keys: RedisKeys, allowed_hosts: Iterable[str] = LOOPBACK_NAMES,
                 publish_verdict: Publish | None = None) -> web.Application:
    """The dashboard's routes; requests naming a host outside ``allowed_hosts`` get 403 (hosts.py).
    With ``publish_verdict``, ``POST /api/verdicts`` takes an analyst's verdict (verdicts.py)."""
    allowed_hosts = tuple(allowed_hosts)
    html = PAGE

    async def index(_request: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html", charset="utf-8",
                            headers={"Cache-Control": "no-store"})

    async def summary(request: web.Request) -> web.Response:
        page = _int_parameter(request, "page", 1)
        per_page = _int_parameter(request, "per_page", MAX_CASES)
        try:
            data = await load_summary(redis, keys, page, per_page)
        except Exception as exc:  # Redis down: say so, the page keeps polling
            log.warning("summary unavailable: %s", exc)
            return web.json_response({"error": f"data store unavailable: {exc}"}, status=503)
        return web.json_response(data, headers={"Cache-Control": "no-store"})

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application(middlewares=[host_check(allowed_hosts)])
    app.router.add_get("/", index)
    app.router.add_get("/api/summary", summary)
    app.router.add_get("/healthz", healthz)
    if publish_verdict is not None:
        app.router.add_post("/api/verdicts", verdict_handler(redis, keys, allowed_hosts, publish_verdict))
        close = getattr(publish_verdict, "close", None)
        if close is not None:        # its Kafka producer goes with the app (aiohttp's cleanup)
            async def close_publisher(_app: web.Application) -> None:
                await asyncio.get_running_loop().run_in_executor(None, close)
            app.on_cleanup.append(close_publisher)

    async def close_redis(_app):
        await redis.aclose()

    app.on_cleanup.append(close_redis)
    return app
