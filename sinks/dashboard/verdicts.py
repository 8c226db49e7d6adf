"""The analyst's verdict on a case: ``POST /api/verdicts`` ``{"case_id", "verdict"}`` from the page's
form, published to ``cases.verdicts`` (``common/verdicts.py``) and kept in Redis for the page.

A write from a browser is what a hostile page would forge, so besides the Host check (``hosts.py``)
the request must carry an ``Origin`` naming the dashboard by an allowed host (browsers send it with
every POST; a page elsewhere cannot set it) and a JSON body (a plain HTML form of another site cannot
send one). The case must exist in Redis; the record is keyed by case_id, so marking it twice leaves
one verdict, the latest. The Redis copy (``{ns}:verdicts``) is written only after Kafka acknowledged.
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime, timezone
from typing import Awaitable, Callable, Iterable
from urllib.parse import urlsplit

from aiohttp import web

from common.contracts import ContractError, format_event_time
from common.redis_keys import RedisKeys
from common.settings import Settings
from common.verdicts import verdict_record
from sinks.dashboard.hosts import host_name

log = logging.getLogger(__name__)
Publish = Callable[[dict], Awaitable[None]]


def origin_allowed(origin: str | None, names: Iterable[str]) -> bool:
    """``Origin`` is ``http(s)://<allowed name>[:port]``."""
    if not origin:
        return False
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and host_name(parts.netloc) in set(names)


class KafkaVerdicts:
    """Publishes verdict records keyed by case_id and waits for the acknowledgement."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.producer = None

    async def __call__(self, record: dict) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._send, record)

    def _send(self, record: dict) -> None:
        from common.kafka_io import json_bytes, make_producer

        if self.producer is None:
            self.producer = make_producer(self.settings)
        self.producer.send(self.settings.topic_verdicts, key=record["case_id"].encode(),
                           value=json_bytes(record)).get(timeout=30)

    def close(self) -> None:
        if self.producer is not None:
            self.producer.close(timeout=10)
            self.producer = None


def verdict_handler(redis, keys: RedisKeys, names: Iterable[str], publish: Publish):
    allowed = frozenset(names)

    async def handle(request: web.Request) -> web.Response:
        if not origin_allowed(request.headers.get("Origin"), allowed):
            return _error(403, "a verdict must come from the dashboard's own page (Origin)")
        if request.content_type != "application/json":
            return _error(415, "send the verdict as JSON")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body is not JSON")
        case_id = body.get("case_id") if isinstance(body, dict) else None
        if not isinstance(case_id, str) or not case_id or len(case_id) > 128:
            return _error(400, "case_id is missing")
        stored = await redis.get(keys.case(case_id))
        if stored is None:
            return _error(404, f"no case {case_id[:32]!r}")
        try:
            record = verdict_record(json.loads(stored), body.get("verdict"),
                                    format_event_time(datetime.now(timezone.utc)))
        except ContractError as error:
            return _error(400, str(error))
        try:
            await publish(record)
        except Exception as error:  # the broker is away: say so, nothing is recorded
            log.warning("verdict on %s not published: %s", case_id, error)
            return _error(503, f"the verdict could not be published: {error}")
        await redis.hset(keys.verdicts, case_id, json.dumps({"verdict": record["verdict"],
                                                             "decided_at": record["decided_at"],
                                                             "detectors": record["detectors"]}))
        return web.json_response({"case_id": case_id, "verdict": record["verdict"]})

    return handle


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)
