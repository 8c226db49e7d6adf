"""Every Kafka client of the project over SASL_SSL (SCRAM-SHA-512, a CA generated at start).

One secure broker for the module (the ``secure_broker`` fixture): kafka-python publishes, the
double_swipe detector runs on Spark's Kafka connector with the exactly-once writer, a read_committed
reader gets the alert back; a Faust app's producer connects with the same settings; wrong
credentials and an untrusted CA are refused with clear errors.
"""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from common.contracts import alert_id
from common.kafka_clients import (KafkaAuthenticationError, KafkaConnectError, check_kafka_connection,
                                  faust_broker_options)
from common.kafka_io import json_values, make_producer, read_topic
from common.waiting import wait_until
from common.kafka_admin import TopicSpec, create_topics
from detectors.registry import get as get_detector
from spark_job.queries import RunOptions, start_detectors
from tests.builders import encode, txn


def with_topics(secure, unique: str):
    """``secure`` settings with the project's topics renamed for this test, created on the broker."""
    names = {f"topic_{base}": f"test.{base}.{unique}" for base in ("transactions", "alerts", "dlq", "alert_markers")}
    s = secure.replace(**names)
    create_topics(s, [TopicSpec(s.topic_transactions, 1),
                      TopicSpec(s.topic_alerts, 1), TopicSpec(s.topic_dlq, 1),
                      TopicSpec(s.topic_alert_markers, 1, {"cleanup.policy": "compact"})])
    return s


def test_the_settings_carry_sasl_ssl_and_the_secrets_stay_private(secure_broker):
    s = secure_broker
    assert (s.kafka_security_protocol, s.kafka_sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert s.kafka_sasl_username and len(s.kafka_sasl_password) >= 24
    security_dir = Path(s.kafka_ssl_cafile).parent
    for path in security_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, f"{path.name} is readable by others"
    assert not (security_dir / "ca.p12").exists()  # the CA's key is gone once it signed the broker's
    check_kafka_connection(s)


def test_transactions_to_alert_over_sasl_ssl_exactly_once(secure_broker, spark, tmp_path, unique):
    s = with_topics(secure_broker, unique)
    first = txn(1, card="card-secure", merchant="m-7", amount=42.5, seconds=0)
    retry = txn(2, card="card-secure", merchant="m-7", amount=42.5, seconds=4.5)
    other = txn(3, card="card-other", amount=19.99, seconds=2)
    producer = make_producer(s)
    for value in (first, other, retry):
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
    producer.flush()
    producer.close()

    queries = start_detectors(spark, [get_detector("double_swipe")], s,
                              RunOptions(sink="exactly-once", checkpoint_root=tmp_path, with_dlq=False))
    try:
        alerts = wait_until(lambda: json_values(read_topic(s, s.topic_alerts)), 90,
                            "the double-swipe alert on the SASL_SSL broker", interval=1.0)
    finally:
        for query in queries:
            query.stop()

    assert len(alerts) == 1
    alert = alerts[0]
    assert alert["alert_id"] == alert_id("double_swipe", [first["txn_id"], retry["txn_id"]])
    assert (alert["detector"], alert["card_id"], alert["txn_ids"]) == \
        ("double_swipe", "card-secure", [first["txn_id"], retry["txn_id"]])
    assert alert["evidence"]["gap_seconds"] == pytest.approx(4.5)
    # The writer's batch marker committed with the alert, in the same transaction.
    assert sum(json.loads(m.value)["records"] for m in read_topic(s, s.topic_alert_markers)) == 1


def test_a_faust_app_produces_over_sasl_ssl(secure_broker, unique):
    import faust
    from faust.types.auth import AuthProtocol, SASLMechanism

    from services.faust_support import make_app

    s = with_topics(secure_broker, unique)
    credentials = faust_broker_options(s)["broker_credentials"]
    assert isinstance(credentials, faust.SASLCredentials)
    assert (credentials.protocol, credentials.mechanism) == (AuthProtocol.SASL_SSL, SASLMechanism.SCRAM_SHA_512)
    app = make_app(f"test-secure-{unique}", s)

    async def produce() -> None:
        producer = app.producer  # Faust's own aiokafka producer, built from the app's config
        await producer.start()
        try:
            await producer.send_and_wait(s.topic_transactions, b"card-faust", b"from faust", partition=None,
                                         timestamp=None, headers=None)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(produce(), 60))
    assert [r.value for r in read_topic(s, s.topic_transactions)] == [b"from faust"]


def test_a_wrong_password_is_refused_with_a_clear_error(secure_broker):
    wrong = secure_broker.replace(kafka_sasl_password="not-the-password")
    endpoint = rf"SASL_SSL://{secure_broker.kafka_bootstrap}".replace(".", r"\.")
    with pytest.raises(KafkaAuthenticationError,
                       match=rf"authentication failed for user '{wrong.kafka_sasl_username}' on {endpoint} "
                             r"\(SCRAM-SHA-512\): .*invalid credentials.*FRAUD_KAFKA_SASL_PASSWORD"):
        make_producer(wrong, bootstrap_timeout_ms=2000)


def test_a_client_that_does_not_trust_the_ca_is_refused_with_a_clear_error(secure_broker):
    untrusted = secure_broker.replace(kafka_ssl_cafile="")  # the system's CAs never signed the broker
    with pytest.raises(KafkaConnectError, match=r"TLS handshake with SASL_SSL://.* failed: .*certificate verify "
                                                r"failed.*FRAUD_KAFKA_SSL_CAFILE"):
        check_kafka_connection(untrusted)
