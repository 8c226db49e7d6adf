"""Every Kafka client of the project over SASL_SSL (SCRAM-SHA-512, a CA generated at start).

One secure broker for the module (the ``secure_broker`` fixture, whose settings are the admin's):
the producer's user publishes, the double_swipe detector runs on Spark's Kafka connector with the
exactly-once writer as the detector job's user, a read_committed reader gets the alert back; a Faust
app's producer connects as the enricher; each component's user is denied outside its ACLs; wrong
credentials and an untrusted CA are refused with clear errors.
"""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from common.contracts import alert_id
from common.kafka_clients import (KafkaAuthenticationError, KafkaConnectError, KafkaUnreachableError,
                                  check_kafka_connection, faust_broker_options, wait_for_kafka)
from common.kafka_io import json_values, make_producer, read_topic
from common.waiting import wait_until
from common.kafka_admin import TopicSpec, create_topics
from deploy.acls import apply_acls
from deploy.broker_security import load as load_secrets, user_settings
from detectors.registry import get as get_detector
from spark_job.queries import RunOptions, start_detectors
from tests.builders import encode, txn


def with_topics(secure, unique: str):
    """``secure`` settings with the project's topics (and the Faust app ids) renamed for this test,
    created on the broker, with every component's ACLs for them."""
    bases = ("transactions", "labels", "alerts", "dlq", "alert_markers", "alerts_enriched", "cases", "verdicts")
    s = secure.replace(**{f"topic_{base}": f"test.{base}.{unique}" for base in bases},
                       enricher_app_id=f"test-enricher-{unique}", cases_app_id=f"test-cases-{unique}")
    create_topics(s, [TopicSpec(s.topic_transactions, 1), TopicSpec(s.topic_labels, 1), TopicSpec(s.topic_alerts_enriched, 1),
                      TopicSpec(s.topic_cases, 1), TopicSpec(s.topic_alerts, 1), TopicSpec(s.topic_dlq, 1),
                      TopicSpec(s.topic_alert_markers, 1, {"cleanup.policy": "compact"}),
                      TopicSpec(s.topic_verdicts, 1, {"cleanup.policy": "compact"})])
    apply_acls(secure, s)
    return s


def as_user(s, component: str):
    """``s`` logged in as ``component``'s user (its password from the broker's owner-only secrets)."""
    return user_settings(s, load_secrets(Path(s.kafka_ssl_cafile).parent), component)


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
    producer = make_producer(as_user(s, "producer"))
    for value in (first, other, retry):
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
    producer.flush()
    producer.close()

    queries = start_detectors(spark, [get_detector("double_swipe")], as_user(s, "detectors"),
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

    from sinks.faust_support import make_app

    s = as_user(with_topics(secure_broker, unique), "enricher")
    credentials = faust_broker_options(s)["broker_credentials"]
    assert isinstance(credentials, faust.SASLCredentials)
    assert (credentials.protocol, credentials.mechanism) == (AuthProtocol.SASL_SSL, SASLMechanism.SCRAM_SHA_512)
    app = make_app(s.enricher_app_id, s)

    async def produce() -> None:
        producer = app.producer  # Faust's own aiokafka producer, built from the app's config
        await producer.start()
        try:
            await producer.send_and_wait(s.topic_alerts_enriched, b"card-faust", b"from faust", partition=None,
                                         timestamp=None, headers=None)
        finally:
            await producer.stop()

    asyncio.run(asyncio.wait_for(produce(), 60))
    assert [r.value for r in read_topic(secure_broker, s.topic_alerts_enriched)] == [b"from faust"]


def denied(action) -> str:
    """The name of the authorization error ``action`` raises (it must raise one)."""
    from kafka.errors import KafkaError

    try:
        action()
    except KafkaError as error:
        assert "AuthorizationFailed" in type(error).__name__, repr(error)
        return type(error).__name__
    raise AssertionError("allowed, but outside the user's ACLs")


def test_each_component_is_denied_outside_its_acls_and_allowed_inside(secure_broker, unique):
    from kafka import TopicPartition

    from common.kafka_io import make_consumer

    s = with_topics(secure_broker, unique)
    producer_user, detectors_user = as_user(s, "producer"), as_user(s, "detectors")

    producer = make_producer(producer_user)
    producer.send(s.topic_transactions, key=b"card-acl", value=b"{}").get(30)          # inside: allowed
    assert denied(lambda: producer.send(s.topic_alerts, key=b"card-acl", value=b"{}").get(30)) \
        == "TopicAuthorizationFailedError"
    producer.close()

    def offsets_as(user, topic):
        """Ask for a partition's first offset as ``user`` (the first request a reader sends)."""
        consumer = make_consumer(user, group_id=None)
        try:
            return consumer.beginning_offsets([TopicPartition(topic, 0)], timeout_ms=10_000)
        finally:
            consumer.close()

    assert denied(lambda: offsets_as(producer_user, s.topic_alerts)) == "TopicAuthorizationFailedError"
    assert [r.value for r in read_topic(detectors_user, s.topic_transactions)] == [b"{}"]   # the job reads them
    # the job writes alerts only in transactions of its own writer ids, and never the transactions
    writer = make_producer(detectors_user, transactional_id=f"fraud-writer.{s.topic_alerts}.rules")
    writer.init_transactions()
    writer.close()
    stranger_id = make_producer(detectors_user, transactional_id="someone-else")
    assert denied(stranger_id.init_transactions) == "TransactionalIdAuthorizationFailedError"
    stranger_id.close()
    job_producer = make_producer(detectors_user)
    assert denied(lambda: job_producer.send(s.topic_transactions, value=b"{}").get(30)) \
        == "TopicAuthorizationFailedError"
    job_producer.close()
    # the case manager cannot read the raw alerts, and nobody without a user's ACLs reads the labels
    assert denied(lambda: offsets_as(as_user(s, "cases"), s.topic_alerts)) == "TopicAuthorizationFailedError"
    assert denied(lambda: offsets_as(as_user(s, "enricher"), s.topic_labels)) == "TopicAuthorizationFailedError"
    # the analyst reads the verdicts the dashboard writes (backtest --verdicts-topic), and cannot write them
    dashboard = make_producer(as_user(s, "dashboard"))
    dashboard.send(s.topic_verdicts, key=b"case-acl", value=b"{}").get(30)
    dashboard.close()
    assert [r.value for r in read_topic(as_user(s, "analyst"), s.topic_verdicts)] == [b"{}"]
    analyst = make_producer(as_user(s, "analyst"))
    assert denied(lambda: analyst.send(s.topic_verdicts, key=b"case-acl", value=b"{}").get(30)) \
        == "TopicAuthorizationFailedError"
    analyst.close()
    # a consumer group of someone else's is refused too
    stranger = make_consumer(as_user(s, "enricher"), group_id=s.cases_app_id)
    stranger.subscribe([s.topic_alerts])
    assert denied(lambda: stranger.poll(timeout_ms=5000)) == "GroupAuthorizationFailedError"
    stranger.close()


def test_a_wrong_password_is_refused_with_a_clear_error(secure_broker):
    wrong = secure_broker.replace(kafka_sasl_password="not-the-password")
    endpoint = rf"SASL_SSL://{secure_broker.kafka_bootstrap}".replace(".", r"\.")
    with pytest.raises(KafkaAuthenticationError,
                       match=rf"authentication failed for user '{wrong.kafka_sasl_username}' on {endpoint} "
                             r"\(SCRAM-SHA-512\): .*invalid credentials.*FRAUD_KAFKA_SASL_PASSWORD"):
        make_producer(wrong, bootstrap_timeout_ms=2000)
    with pytest.raises(KafkaAuthenticationError):       # a standby does not wait for what waiting cannot mend
        wait_for_kafka(wrong)


def test_a_client_that_does_not_trust_the_ca_is_refused_with_a_clear_error(secure_broker):
    untrusted = secure_broker.replace(kafka_ssl_cafile="")  # the system's CAs never signed the broker
    with pytest.raises(KafkaConnectError, match=r"TLS handshake with SASL_SSL://.* failed: .*certificate verify "
                                                r"failed.*FRAUD_KAFKA_SSL_CAFILE"):
        check_kafka_connection(untrusted)
    with pytest.raises(KafkaConnectError) as refused:
        wait_for_kafka(untrusted)
    assert not isinstance(refused.value, KafkaUnreachableError)


def test_the_enricher_and_case_manager_run_as_their_own_users(secure_broker, unique, tmp_path):
    """The real workers (``python -m sinks.enricher worker`` ...), each with its own user in its own
    environment: an alert written by the detector job's user comes out as a case, so their ACLs hold
    everything a Faust worker does (its group, changelog, assignor topic)."""
    import os
    import subprocess
    import sys

    from common.kafka_io import json_bytes
    from common.settings import REPO_ROOT
    from deploy.local_stack import RedisServer, free_ports
    from tests.builders import make_alert

    s = with_topics(secure_broker, unique).replace(
        partitions_alerts=1, run_dir=tmp_path / "run", sinks_namespace=f"t-{unique}",
        redis_url=f"redis://127.0.0.1:{free_ports(26600, 26700)}/0")
    redis_server = RedisServer(s)
    redis_server.up()
    workers = []
    try:
        for component, module in (("enricher", "sinks.enricher"), ("cases", "sinks.cases")):
            log = open(tmp_path / f"{component}.log", "wb")
            env = dict(os.environ, **as_user(s, component).to_env(), PYTHONUNBUFFERED="1")
            workers.append(subprocess.Popen([sys.executable, "-m", module, "worker", "-l", "info"], env=env,
                                            cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        alert = make_alert(f"card-{unique}", [f"{unique}-t1", f"{unique}-t2"], "double_swipe", score=0.7)
        writer = make_producer(as_user(s, "detectors"), transactional_id=f"fraud-writer.{s.topic_alerts}.t")
        writer.init_transactions()
        writer.begin_transaction()
        writer.send(s.topic_alerts, key=alert["card_id"].encode(), value=json_bytes(alert))
        writer.commit_transaction()
        writer.close()

        def a_case():
            for worker, name in zip(workers, ("enricher", "cases")):
                if worker.poll() is not None:
                    raise AssertionError(f"{name} exited: {(tmp_path / f'{name}.log').read_text()[-3000:]}")
            return json_values(read_topic(s, s.topic_cases, timeout=30))

        cases = wait_until(a_case, 180, "a case from the secure enricher and case manager", interval=1.0)
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
        redis_server.stop()
    assert [(c["card_id"], c["alert_ids"]) for c in cases] == [(alert["card_id"], [alert["alert_id"]])]
    denials = [line for name in ("enricher", "cases")
               for line in (tmp_path / f"{name}.log").read_text().splitlines() if "AuthorizationFailed" in line]
    assert not denials, denials[:3]
