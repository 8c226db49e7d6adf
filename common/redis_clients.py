"""Redis clients built from the settings: the one place that applies the Redis URL and password.

``FRAUD_REDIS_URL`` says where Redis is (``redis://host:port/db``, or ``rediss://`` for TLS) and
``FRAUD_REDIS_PASSWORD`` the password of Redis AUTH (``requirepass``), kept out of the URL so that
the URL can be logged and shown. A password written in the URL (``redis://:pw@host:port/db``) works
too; ``FRAUD_REDIS_PASSWORD`` wins when both are set.

Redis reports a refused password only at the first command; ``check_redis`` runs one (PING) and
turns the failure into a ``RedisAuthError`` or ``RedisUnreachableError`` that names the address and
the setting to fix.
"""

from __future__ import annotations

from typing import Any

from common.settings import Settings


class RedisUnreachableError(ConnectionError):
    """No Redis answered at the configured address."""


class RedisAuthError(RedisUnreachableError):
    """Redis refused the password (or wanted one and got none)."""


def _options(settings: Settings, options: dict[str, Any]) -> dict[str, Any]:
    if settings.redis_password:
        options.setdefault("password", settings.redis_password)
    return options


def redis_client(settings: Settings, **options: Any):
    """A ``redis.Redis`` for the settings' URL and password; ``options`` go to ``from_url``."""
    import redis

    return redis.Redis.from_url(settings.redis_url, **_options(settings, options))


def async_redis_client(settings: Settings, **options: Any):
    """A ``redis.asyncio.Redis`` for the settings' URL and password (for the Faust services)."""
    import redis.asyncio

    return redis.asyncio.Redis.from_url(settings.redis_url, **_options(settings, options))


def redis_address(settings: Settings) -> str:
    """The URL without any credentials: safe to log."""
    scheme, rest = settings.redis_url.split("://", 1)
    return f"{scheme}://{rest.rsplit('@', 1)[-1]}"


def check_redis(settings: Settings, timeout: float = 2.0) -> None:
    """PING Redis with the settings' credentials; raise a clear error if that fails."""
    import redis

    client = redis_client(settings, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        client.ping()
    except redis.AuthenticationError as error:
        given = "a password" if settings.redis_password or "@" in settings.redis_url else "no password"
        raise RedisAuthError(f"Redis at {redis_address(settings)} refused the login with {given}: {error}. "
                             f"Check FRAUD_REDIS_PASSWORD (Redis' requirepass).") from error
    except redis.ResponseError as error:
        if "NOAUTH" not in str(error) and "AUTH" not in str(error):
            raise
        raise RedisAuthError(f"Redis at {redis_address(settings)} refused the login: {error}. "
                             f"Check FRAUD_REDIS_PASSWORD (Redis' requirepass).") from error
    except (redis.ConnectionError, redis.TimeoutError, OSError) as error:
        raise RedisUnreachableError(f"no Redis answered at {redis_address(settings)} ({_why_not(error, timeout)}): "
                                    f"`make up` starts the local stack (python -m deploy status shows it); "
                                    f"else check FRAUD_REDIS_URL.") from error
    finally:
        client.close()


def _why_not(error: BaseException, timeout: float) -> str:
    """"Connection refused" rather than "Error 111 connecting to 127.0.0.1:16379. Connection refused."."""
    import redis

    cause = error.__cause__ or error.__context__
    if isinstance(error, redis.TimeoutError) or isinstance(cause, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return str(error).rstrip(".") or type(error).__name__
