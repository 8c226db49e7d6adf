"""An analyst marks a case on the dashboard, in a real headless Chromium that clicks the page's button;
the verdict is read back from the ``cases.verdicts`` topic (read_committed). The real dashboard app,
Redis and broker; a POST without the page's Origin is refused. The page also shows each detector's
parameters in force and when they changed."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from aiohttp import web

from common.kafka_io import read_topic
from common.redis_keys import RedisKeys
from sinks.case_logic import apply_alert
from sinks.dashboard.app import make_web_app
from sinks.dashboard.hosts import LOOPBACK_NAMES
from sinks.dashboard.verdicts import KafkaVerdicts
from sinks.faust_support import redis_client
from tests.browser import Browser, until
from tests.builders import make_alert
from tests.dashboard_dom import CHROMIUM, NO_CHROMIUM

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)


def test_a_case_marked_fraud_in_the_browser_is_on_the_verdicts_topic(stack, topics, redis_client, unique, tmp_path):
    s = stack.replace(topic_verdicts=topics("verdicts", partitions=2, cleanup__policy="compact"),
                      sinks_namespace=f"test-{unique}")
    keys = RedisKeys(s.sinks_namespace)
    case = apply_alert(None, make_alert(f"card-{unique}", ["t-1", "t-2"], event_s=5))
    redis_client.set(keys.case(case["case_id"]), json.dumps(case))
    redis_client.zadd(keys.open_cases, {case["case_id"]: 1})
    redis_client.hset(keys.params, "velocity", json.dumps({   # as the detector job publishes it (live_params)
        "version": 2, "params": {"min_count": 4, "channels": ["ecom"]}, "set_at": "2026-11-26T10:00:00.000Z",
        "author": "ana", "reason": "slower testers", "applied_at": "2026-11-26T10:00:03.000Z"}))

    asyncio.run(_mark_in_browser(s, keys, case, tmp_path))

    records = read_topic(s, s.topic_verdicts, timeout=30)
    assert [r.key.decode() for r in records] == [case["case_id"]]        # one verdict, keyed by the case
    verdict = json.loads(records[0].value)
    assert verdict["verdict"] == "fraud" and verdict["card_id"] == case["card_id"]
    assert verdict["txn_ids"] == case["txn_ids"] and verdict["alert_ids"] == case["alert_ids"]


async def _mark_in_browser(s, keys, case: dict, tmp_path) -> None:
    case_id = case["case_id"]
    app = make_web_app(redis_client(s), keys, LOOPBACK_NAMES, KafkaVerdicts(s))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://127.0.0.1:{port}/"
    try:
        async with aiohttp.ClientSession() as http:     # no Origin, or another site's: refused
            for headers in ({}, {"Origin": "http://attacker.example"}):
                async with http.post(url + "api/verdicts", json={"case_id": case_id, "verdict": "fraud"},
                                     headers=headers) as response:
                    assert response.status == 403, await response.text()
        profile = tmp_path / "chromium"
        profile.mkdir()
        async with Browser(profile) as page:
            await page.goto(url)
            button = f'document.querySelector(\'button[data-verdict="fraud"][data-case="{case_id}"]\')'
            await until(lambda: page.js(f"{button} !== null"), 60, "the case's fraud button")
            await page.js(f"{button}.click()")
            status = await until(lambda: page.js(
                "(t => t.includes('marked') || t.includes('not recorded') ? t : '')"
                "(document.getElementById('verdict-status').textContent)"), 60, "the verdict's answer")
            assert status == f"case {case_id[:10]} marked fraud"
            shown = await until(lambda: page.js(
                f"(r => r && r.querySelector('.verdict-given').textContent)"
                f"(document.querySelector('tr[data-case-id=\"{case_id}\"]'))"), 30, "the verdict in the row")
            assert shown == "fraud"
            detector = case["detectors"][0]      # its precision against the analysts: 1 fraud of 1 judged
            precision = await until(lambda: page.js(
                f"(r => r && r.querySelector('.precision').textContent)"
                f"(document.querySelector('#detectors tr[data-detector=\"{detector}\"]'))"), 30,
                "the detector's precision against the verdicts")
            assert precision == "1.00 (1 of 1)"
            params = await page.js("[...document.querySelectorAll('#params tr[data-detector=\"velocity\"] td')]"
                                   ".map(td => td.textContent)")
            assert params == ["velocity", "v2", "min_count=4  channels=ecom", "2026-11-26 10:00:00",
                              "ana: slower testers", "10:00:03"]
    finally:
        await runner.cleanup()
