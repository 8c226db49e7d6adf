"""TLS/SASL and Redis AUTH settings reach every client dialect; secrets stay masked (no services)."""

from __future__ import annotations

import re

from common.kafka_clients import faust_broker_options, kafka_python_config, spark_kafka_options
from common.redis_clients import redis_address, redis_client
from common.settings import Settings
from deploy.acls import COMPONENTS
from deploy.broker_security import BrokerSecrets, scram_format_args, server_properties

SECURE = Settings.from_env(environ={}).replace(
    kafka_bootstrap="broker-1:9093,broker-2:9093", kafka_security_protocol="SASL_SSL",
    kafka_sasl_mechanism="SCRAM-SHA-512", kafka_sasl_username="fraud", kafka_sasl_password='p"w\\1',
    kafka_ssl_cafile="")


def test_kafka_python_gets_sasl_and_a_tls_context():
    config = kafka_python_config(SECURE)
    assert config["bootstrap_servers"] == ["broker-1:9093", "broker-2:9093"]
    assert (config["security_protocol"], config["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == ("fraud", 'p"w\\1')
    assert config["ssl_context"].check_hostname


def test_spark_gets_a_pem_truststore_and_a_quoted_jaas_line():
    options = spark_kafka_options(SECURE.replace(kafka_ssl_cafile="/ca.pem", kafka_ssl_check_hostname=False))
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert (options["kafka.ssl.truststore.type"], options["kafka.ssl.truststore.location"]) == ("PEM", "/ca.pem")
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="fraud" password="p\\"w\\\\1";')


def test_faust_gets_scram_credentials_over_tls():
    from faust.types.auth import AuthProtocol, SASLMechanism

    options = faust_broker_options(SECURE)
    assert options["broker"] == "kafka://broker-1:9093;kafka://broker-2:9093"
    credentials = options["broker_credentials"]
    assert (credentials.protocol, credentials.mechanism) == (AuthProtocol.SASL_SSL, SASLMechanism.SCRAM_SHA_512)
    assert (credentials.username, credentials.password) == ("fraud", 'p"w\\1')


def test_plaintext_stays_plain():
    plain = Settings.from_env(environ={})
    assert "sasl_mechanism" not in kafka_python_config(plain)
    assert not any(key.startswith(("kafka.ssl", "kafka.sasl")) for key in spark_kafka_options(plain))
    assert "broker_credentials" not in faust_broker_options(plain)


def test_the_redis_password_setting_reaches_the_client_and_never_the_address():
    s = Settings.from_env(environ={"FRAUD_REDIS_URL": "redis://127.0.0.1:6390/2", "FRAUD_REDIS_PASSWORD": "s3cret"})
    kwargs = redis_client(s).connection_pool.connection_kwargs
    assert (kwargs["password"], kwargs["port"], kwargs["db"]) == ("s3cret", 6390, 2)
    in_url = s.replace(redis_url="redis://:urlpw@127.0.0.1:6390/2", redis_password="")
    assert redis_client(in_url).connection_pool.connection_kwargs["password"] == "urlpw"
    assert redis_address(in_url) == "redis://127.0.0.1:6390/2"


def test_passwords_are_masked_also_inside_urls():
    s = Settings.from_env(environ={"FRAUD_REDIS_URL": "redis://:urlpw@127.0.0.1:6390/0",
                                   "FRAUD_REDIS_PASSWORD": "s3cret"})
    described = str(s.describe())
    assert "urlpw" not in described and "s3cret" not in described
    assert "redis://***@127.0.0.1:6390/0" in described


def test_the_secure_broker_config_names_its_listener_users_authorizer_and_key_material():
    made = BrokerSecrets(folder="/run/kafka/security", keystore_password="ks", broker_password="bp",
                         admin_password="ap", component_passwords={c: f"{c}-pw" for c in COMPONENTS})
    props = dict(line.split("=", 1) for line in server_properties(made, "CLIENT").splitlines())
    assert props["listener.name.client.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert 'username="broker" password="bp"' in props["listener.name.client.scram-sha-512.sasl.jaas.config"]
    # the controller listener: PLAIN, its only user the broker
    assert props["sasl.mechanism.controller.protocol"] == "PLAIN"
    assert 'user_broker="bp"' in props["listener.name.controller.plain.sasl.jaas.config"]
    assert props["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert props["super.users"] == "User:broker;User:admin"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["ssl.keystore.location"] == "/run/kafka/security/broker.p12"
    assert props["ssl.truststore.location"] == "/run/kafka/security/ca.pem"
    assert scram_format_args(made)[:4] == ["--add-scram", "SCRAM-SHA-512=[name=broker,password=bp]",
                                           "--add-scram", "SCRAM-SHA-512=[name=admin,password=ap]"]
    assert scram_format_args(made).count("--add-scram") == 2 + len(COMPONENTS)


def test_java_argument_files_quote_what_they_carry():
    from deploy.local_stack import java_argfile_line

    assert java_argfile_line('SCRAM-SHA-512=[name=a,password=p"q\\r s]') == \
        '"SCRAM-SHA-512=[name=a,password=p\\"q\\\\r s]"\n'


def test_cluster_ids_look_like_kafkas():
    from deploy.local_stack import random_cluster_id

    ids = {random_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", cluster_id) for cluster_id in ids)


def test_no_kafka_or_redis_secret_reaches_the_spark_configuration(tmp_path):
    # PySpark hands every SparkConf entry to spark-submit as --conf on its command line: the Kafka
    # credentials must stay in the sources' and sinks' options, never the session's configuration.
    from common.spark import session_config

    (tmp_path / "spark-sql-kafka.jar").write_bytes(b"")       # no downloads in a unit test
    (tmp_path / "fraud-spark-job.jar").write_bytes(b"")
    secure = SECURE.replace(redis_password="redis-secret-pw", spark_jars_dir=tmp_path,
                            spark_job_jar=tmp_path / "fraud-spark-job.jar")
    config = session_config(secure, "tests", with_kafka=True)
    text = " ".join(f"{k}={v}" for k, v in config.items())
    assert secure.kafka_sasl_password not in text and "redis-secret-pw" not in text
    assert not any("sasl" in key or "jaas" in key for key in config)


def test_secrets_of_an_older_secure_broker_are_refused_with_what_to_do(tmp_path):
    import json

    import pytest

    from deploy.local_stack import KafkaBroker, StackError

    folder = tmp_path / "kafka" / "security"
    folder.mkdir(parents=True)
    (folder / "secrets.json").write_text(json.dumps({"folder": str(folder), "keystore_password": "k",
                                                     "broker_password": "b", "client_password": "c"}))
    with pytest.raises(StackError, match=r"lacks the users of today's secure broker .*python -m deploy wipe"):
        KafkaBroker(Settings().replace(run_dir=tmp_path), secure=True).secrets()
