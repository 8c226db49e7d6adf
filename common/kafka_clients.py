"""Kafka client configuration built from the settings, for each client library the project uses.

kafka-python, Spark's Kafka connector and Faust spell the same connection settings differently;
this module is the one place that translates ``Settings`` into each dialect, so security settings
(SASL/SCRAM, TLS) reach every component the same way.

When a client cannot connect, ``explained_connect_errors`` turns the library's generic "unable to
bootstrap" into a clear ``KafkaConnectError``: authentication refused, TLS handshake failed, or no
broker listening, naming the user, the address and the settings to check.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import time
from typing import Any, Callable, Iterator

from common.settings import Settings


def kafka_python_config(settings: Settings) -> dict[str, Any]:
    """Connection keyword arguments for kafka-python's producer, consumer and admin client."""
    config: dict[str, Any] = {
        "bootstrap_servers": settings.kafka_bootstrap.split(","),
        "security_protocol": settings.kafka_security_protocol,
    }
    if settings.kafka_security_protocol in {"SSL", "SASL_SSL"}:
        config["ssl_context"] = _ssl_context(settings)
    if settings.kafka_security_protocol.startswith("SASL"):
        config["sasl_mechanism"] = settings.kafka_sasl_mechanism or "SCRAM-SHA-512"
        config["sasl_plain_username"] = settings.kafka_sasl_username
        config["sasl_plain_password"] = settings.kafka_sasl_password
    return config


def spark_kafka_options(settings: Settings) -> dict[str, str]:
    """``kafka.*`` options for Spark's Kafka source and sink."""
    options = {
        "kafka.bootstrap.servers": settings.kafka_bootstrap,
        "kafka.security.protocol": settings.kafka_security_protocol,
    }
    if settings.kafka_security_protocol in {"SSL", "SASL_SSL"} and settings.kafka_ssl_cafile:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = settings.kafka_ssl_cafile
        if not settings.kafka_ssl_check_hostname:
            options["kafka.ssl.endpoint.identification.algorithm"] = ""
    if settings.kafka_security_protocol.startswith("SASL"):
        mechanism = settings.kafka_sasl_mechanism or "SCRAM-SHA-512"
        module = ("org.apache.kafka.common.security.scram.ScramLoginModule" if mechanism.startswith("SCRAM")
                  else "org.apache.kafka.common.security.plain.PlainLoginModule")
        options["kafka.sasl.mechanism"] = mechanism
        options["kafka.sasl.jaas.config"] = (
            f'{module} required username="{_jaas_quote(settings.kafka_sasl_username)}" '
            f'password="{_jaas_quote(settings.kafka_sasl_password)}";'
        )
    return options


def faust_broker_options(settings: Settings) -> dict[str, Any]:
    """``broker`` and ``broker_credentials`` arguments for a ``faust.App``."""
    import faust  # imported here: only the Faust services need it

    broker = ";".join(f"kafka://{hostport}" for hostport in settings.kafka_bootstrap.split(","))
    options: dict[str, Any] = {"broker": broker}
    protocol = settings.kafka_security_protocol
    if protocol == "SSL":
        options["broker_credentials"] = faust.SSLCredentials(_ssl_context(settings))
    elif protocol.startswith("SASL"):
        # An SSL context makes the credentials SASL_SSL, none SASL_PLAINTEXT.
        ctx = _ssl_context(settings) if protocol == "SASL_SSL" else None
        options["broker_credentials"] = faust.SASLCredentials(
            username=settings.kafka_sasl_username, password=settings.kafka_sasl_password,
            ssl_context=ctx, mechanism=settings.kafka_sasl_mechanism or "SCRAM-SHA-512")
    return options


def _ssl_context(settings: Settings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=settings.kafka_ssl_cafile or None)
    context.check_hostname = settings.kafka_ssl_check_hostname
    return context


def _jaas_quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


# --------------------------------------------------------------------------------------------
# Clear connection errors
# --------------------------------------------------------------------------------------------

class KafkaConnectError(ConnectionError):
    """A Kafka client could not connect; the message says why and which settings to check."""


class KafkaAuthenticationError(KafkaConnectError):
    """The broker refused the SASL login (wrong user name, password or mechanism)."""


class KafkaUnreachableError(KafkaConnectError):
    """No broker answered at all (refused, no answer in time): a stopped broker, or a wrong address."""


def describe_endpoint(settings: Settings, hostport: str | None = None) -> str:
    return f"{settings.kafka_security_protocol}://{hostport or settings.kafka_bootstrap}"


def check_kafka_connection(settings: Settings, timeout: float = 10.0) -> None:
    """Open one connection to a bootstrap server the way every client does (TCP, TLS handshake, SASL
    login), then close it. Returns if one server accepts; else raises the clearest error met:
    ``KafkaAuthenticationError``, or ``KafkaConnectError`` for TLS and network failures.

    It uses aiokafka's single-connection API (Faust's client library), which reports the broker's
    authentication error deterministically; kafka-python may see only the closed socket.
    """
    errors = [asyncio.run(_probe(settings, hostport, timeout)) for hostport in settings.kafka_bootstrap.split(",")]
    if any(error is None for error in errors):
        return
    raise next((e for e in errors if isinstance(e, KafkaAuthenticationError)), errors[0])


async def _probe(settings: Settings, hostport: str, timeout: float) -> KafkaConnectError | None:
    from aiokafka import errors as aio_errors
    from aiokafka.conn import create_conn

    host, port = hostport.strip().rsplit(":", 1)
    protocol = settings.kafka_security_protocol
    endpoint = describe_endpoint(settings, hostport.strip())
    options: dict[str, Any] = {"security_protocol": protocol, "request_timeout_ms": int(timeout * 1000)}
    if protocol in {"SSL", "SASL_SSL"}:
        options["ssl_context"] = _ssl_context(settings)
    if protocol.startswith("SASL"):
        options.update(sasl_mechanism=settings.kafka_sasl_mechanism or "SCRAM-SHA-512",
                       sasl_plain_username=settings.kafka_sasl_username,
                       sasl_plain_password=settings.kafka_sasl_password)
    try:
        conn = await asyncio.wait_for(create_conn(host, int(port), **options), timeout)
    except (aio_errors.SaslAuthenticationFailed, aio_errors.UnsupportedSaslMechanismError,
            aio_errors.IllegalSaslStateError) as error:
        return KafkaAuthenticationError(
            f"authentication failed for user {settings.kafka_sasl_username!r} on {endpoint} "
            f"({options['sasl_mechanism']}): {error}. Check FRAUD_KAFKA_SASL_USERNAME, "
            f"FRAUD_KAFKA_SASL_PASSWORD and FRAUD_KAFKA_SASL_MECHANISM.")
    except ssl.SSLError as error:
        return KafkaConnectError(
            f"TLS handshake with {endpoint} failed: {error}. Check FRAUD_KAFKA_SSL_CAFILE (the CA that "
            f"signed the broker's certificate) and FRAUD_KAFKA_SSL_CHECK_HOSTNAME.")
    except (OSError, asyncio.TimeoutError, aio_errors.KafkaError) as error:
        return KafkaUnreachableError(
            f"no Kafka broker answered on {endpoint} ({_why_not(error, timeout)}): `make up` starts the "
            f"local stack (python -m deploy status shows it); else check FRAUD_KAFKA_BOOTSTRAP and that "
            f"FRAUD_KAFKA_SECURITY_PROTOCOL={protocol} is what its listener speaks.")
    conn.close()
    return None


def _why_not(error: BaseException, timeout: float) -> str:
    """"Connection refused" rather than "[Errno 111] Connect call failed ('127.0.0.1', 19092)"."""
    if isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer within {timeout:g} s"
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno)
    return str(error) or type(error).__name__


WAIT_SAY_EVERY_S = 30.0    # how often wait_for_kafka says it still waits


def kafka_unreachable(settings: Settings, timeout: float = 5.0) -> bool:
    """Whether no bootstrap server answers at all (an outage; a refused login is an answer)."""
    try:
        check_kafka_connection(settings, timeout=timeout)
    except KafkaUnreachableError:
        return True
    except KafkaConnectError:
        return False
    return False


def wait_for_kafka(settings: Settings, say: Callable[[str], None] = print, probe_timeout: float = 5.0) -> None:
    """Return once a bootstrap server answers, saying every ``WAIT_SAY_EVERY_S`` that it waits. For a process
    that has nothing to do until it reaches the broker (a standby detector job started during a broker
    outage). Only an unreachable broker is waited for: a refused login or a failed TLS handshake is raised
    at once, since waiting does not mend it."""
    waited_since = time.monotonic()
    said_at = None
    while True:
        try:
            check_kafka_connection(settings, timeout=probe_timeout)
            if said_at is not None:
                say(f"the Kafka broker answers again after {time.monotonic() - waited_since:.0f} s")
            return
        except KafkaUnreachableError as error:
            if said_at is None or time.monotonic() - said_at >= WAIT_SAY_EVERY_S:
                say(f"waiting for the Kafka broker ({time.monotonic() - waited_since:.0f} s so far): {error}")
                said_at = time.monotonic()
        time.sleep(1.0)


@contextlib.contextmanager
def explained_connect_errors(settings: Settings) -> Iterator[None]:
    """Around the construction of a kafka-python client: if it cannot bootstrap, find out why with
    ``check_kafka_connection`` and raise that clear error (the library's own is chained to it)."""
    from kafka.errors import KafkaTimeoutError

    try:
        yield
    except KafkaTimeoutError as error:  # kafka-python 3: "Unable to bootstrap from [...]"
        try:
            check_kafka_connection(settings)
        except KafkaConnectError as clear:
            raise clear from error
        raise
