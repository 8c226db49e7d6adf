"""The dashboard answers only requests naming it by an allowed host (DNS rebinding): a real aiohttp
server on a local port, requests with the Host headers a browser would send."""

from __future__ import annotations

import asyncio

from aiohttp.test_utils import TestClient, TestServer

from common.redis_keys import RedisKeys
from common.settings import Settings
from sinks.dashboard.app import make_web_app
from sinks.dashboard.hosts import allowed_names, host_name


class NoRedis:
    async def aclose(self):
        pass


def statuses(hosts: list[str | None], allowed=None) -> dict:
    """GET /healthz and / once per Host header (None: the client's own, 127.0.0.1:port)."""
    extra = {} if allowed is None else {"allowed_hosts": allowed}

    async def scenario():
        app = make_web_app(NoRedis(), RedisKeys("fraud"), **extra)
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            out = {}
            for host in hosts:
                headers = {} if host is None else {"Host": host}
                health = await client.get("/healthz", headers=headers)
                page = await client.get("/", headers=headers)
                out[host] = (health.status, page.status, await page.text())
            return out

    return asyncio.run(scenario())


def test_a_foreign_host_header_is_refused_and_loopback_names_are_served():
    seen = statuses([None, "localhost:8765", "127.0.0.1:8765", "[::1]:8765", "LOCALHOST",
                     "evil.example:8765", "evil.example", "127.0.0.1.evil.example:8765", "localhost:80x", ""])
    for host in (None, "localhost:8765", "127.0.0.1:8765", "[::1]:8765", "LOCALHOST"):
        assert seen[host][:2] == (200, 200), host
    for host in ("evil.example:8765", "evil.example", "127.0.0.1.evil.example:8765", "localhost:80x", ""):
        health, page, text = seen[host]
        assert (health, page) == (403, 403), host
        assert "is not served here" in text and "FRAUD_DASHBOARD_ALLOWED_HOSTS" in text
        assert "<html" not in text.lower()
    assert seen["evil.example"][2].count("\n") == 1        # one line


def test_names_from_the_setting_are_served_too():
    settings = Settings.from_env(environ={"FRAUD_DASHBOARD_ALLOWED_HOSTS": "fraud.example.org, Ops.Example."})
    names = allowed_names("127.0.0.1", settings.dashboard_allowed_hosts)
    assert names == {"127.0.0.1", "localhost", "::1", "fraud.example.org", "ops.example"}
    seen = statuses(["fraud.example.org:443", "ops.example", "other.example.org"], allowed=names)
    assert seen["fraud.example.org:443"][:2] == seen["ops.example"][:2] == (200, 200)
    assert seen["other.example.org"][:2] == (403, 403)


def test_the_bound_address_is_allowed_unless_it_is_a_wildcard():
    assert "10.1.2.3" in allowed_names("10.1.2.3")
    assert allowed_names("0.0.0.0") == allowed_names("::") == {"127.0.0.1", "localhost", "::1"}
    assert Settings().dashboard_host == "127.0.0.1"        # loopback unless told otherwise


def test_host_headers_are_parsed_without_their_port():
    assert host_name("LocalHost:8765") == "localhost"
    assert host_name("[::1]:8765") == host_name("[::1]") == "::1"
    assert host_name("example.org.") == "example.org"
    assert host_name("a:b") is None and host_name("[::1]x") is None and host_name(None) is None
