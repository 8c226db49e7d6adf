"""Redis AUTH: a private redis-server with ``requirepass`` (a generated password) on a free port.

Our clients (``common.redis_clients``, used by every component) log in with FRAUD_REDIS_PASSWORD;
a wrong or missing password gives a clear error naming the address and the setting.
"""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import pytest

from common.redis_clients import RedisAuthError, async_redis_client, check_redis, redis_client


@pytest.fixture(scope="module")
def auth_redis(settings, tmp_path_factory):
    """Settings of a throw-away Redis that requires a password generated here."""
    from deploy.local_stack import RedisServer, port_open

    port = next(p for p in range(26400, 26500) if not port_open("127.0.0.1", p))
    private = settings.replace(redis_url=f"redis://127.0.0.1:{port}/0", redis_password=secrets.token_urlsafe(18),
                               run_dir=tmp_path_factory.mktemp("auth-redis"))
    server = RedisServer(private)
    server.up()
    try:
        yield private
    finally:
        server.stop()


def test_our_clients_log_in_with_the_password_from_the_settings(auth_redis, unique):
    check_redis(auth_redis)
    client = redis_client(auth_redis, decode_responses=True)
    client.set(f"auth-{unique}", "ok")
    assert client.get(f"auth-{unique}") == "ok"
    client.close()

    async def async_get() -> str:  # the Faust services' client
        async_client = async_redis_client(auth_redis, decode_responses=True)
        try:
            return await async_client.get(f"auth-{unique}")
        finally:
            await async_client.aclose()

    assert asyncio.run(async_get()) == "ok"


def test_a_password_in_the_url_works_too(auth_redis):
    host_port_db = auth_redis.redis_url.split("://", 1)[1]
    check_redis(auth_redis.replace(redis_url=f"redis://:{auth_redis.redis_password}@{host_port_db}", redis_password=""))


def test_a_wrong_or_missing_password_is_refused_with_a_clear_error(auth_redis):
    address = auth_redis.redis_url.replace(".", r"\.")
    with pytest.raises(RedisAuthError, match=rf"Redis at {address} refused the login with a password: "
                                             r".*FRAUD_REDIS_PASSWORD"):
        check_redis(auth_redis.replace(redis_password="not-the-password"))
    with pytest.raises(RedisAuthError, match=rf"Redis at {address} refused the login with no password"):
        check_redis(auth_redis.replace(redis_password=""))


def test_the_password_is_not_on_the_server_command_line(auth_redis):
    from deploy.local_stack import RedisServer

    pid = RedisServer(auth_redis).pid()
    assert pid is not None
    assert auth_redis.redis_password not in Path(f"/proc/{pid}/cmdline").read_text()
