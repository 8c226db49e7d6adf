"""Kafka client configuration built from the settings, for each client library the project uses.

kafka-python, Spark's Kafka connector and Faust spell the same connection settings differently;
this module is the one place that translates ``Settings`` into each dialect, so security settings
(SASL/SCRAM, TLS) reach every component the same way.
"""

from __future__ import annotations

import ssl
from typing import Any

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
            f'{module} required username="{settings.kafka_sasl_username}" '
            f'password="{settings.kafka_sasl_password}";'
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
        ctx = _ssl_context(settings) if protocol == "SASL_SSL" else None
        mechanism = settings.kafka_sasl_mechanism or "SCRAM-SHA-512"
        if mechanism.startswith("SCRAM"):
            options["broker_credentials"] = faust.auth.SASLCredentials(
                username=settings.kafka_sasl_username, password=settings.kafka_sasl_password,
                ssl_context=ctx, mechanism=mechanism)
        else:
            options["broker_credentials"] = faust.SASLCredentials(
                username=settings.kafka_sasl_username, password=settings.kafka_sasl_password,
                ssl_context=ctx)
    return options


def _ssl_context(settings: Settings) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=settings.kafka_ssl_cafile or None)
    context.check_hostname = settings.kafka_ssl_check_hostname
    return context
