from pathlib import Path

import pytest

from common.settings import REPO_ROOT, Settings, checkpoint_location


def test_defaults_point_at_the_local_stack():
    s = Settings.from_env(environ={})
    assert s.kafka_bootstrap.startswith("127.0.0.1:")
    assert s.redis_url.startswith("redis://127.0.0.1:")
    assert s.partitions_transactions == 12 and s.partitions_alerts == 6


def test_every_setting_is_overridden_by_its_environment_variable():
    env = {"FRAUD_KAFKA_BOOTSTRAP": "broker:9093", "FRAUD_PARTITIONS_TRANSACTIONS": "24",
           "FRAUD_KAFKA_SSL_CHECK_HOSTNAME": "false", "FRAUD_CHECKPOINT_ROOT": "/tmp/cp"}
    s = Settings.from_env(environ=env)
    assert (s.kafka_bootstrap, s.kafka_host, s.kafka_port) == ("broker:9093", "broker", 9093)
    assert s.partitions_transactions == 24
    assert s.kafka_ssl_check_hostname is False
    assert s.checkpoint_root == "/tmp/cp"


@pytest.mark.parametrize("root, location", [
    ("s3a://fraud-state/checkpoints", "s3a://fraud-state/checkpoints/detector-velocity"),
    ("hdfs://namenode:8020/fraud/", "hdfs://namenode:8020/fraud/detector-velocity"),
    ("/var/lib/fraud/checkpoints", "/var/lib/fraud/checkpoints/detector-velocity"),
])
def test_a_checkpoint_root_keeps_its_uri(root, location):
    s = Settings.from_env(environ={"FRAUD_CHECKPOINT_ROOT": root})
    assert s.checkpoint_root == root
    assert checkpoint_location(s.checkpoint_root, "detector-velocity") == location


def test_a_local_checkpoint_root_may_be_a_path():
    assert checkpoint_location(Path("/var/lib/fraud"), "detector-velocity") == "/var/lib/fraud/detector-velocity"


def test_a_bad_value_gives_a_clear_error():
    with pytest.raises(ValueError, match="FRAUD_PARTITIONS_ALERTS|partitions_alerts"):
        Settings.from_env(environ={"FRAUD_PARTITIONS_ALERTS": "six"})


def test_secrets_are_masked_when_described():
    s = Settings.from_env(environ={"FRAUD_KAFKA_SASL_PASSWORD": "hunter2", "FRAUD_DLQ_HASH_KEY": "pepper9"})
    assert "hunter2" not in str(s.describe()) and "pepper9" not in str(s.describe())


def test_connector_pom_pins_the_installed_pyspark_version():
    import pyspark

    pom = (REPO_ROOT / "deploy" / "maven" / "spark-kafka" / "pom.xml").read_text()
    assert f"<spark.version>{pyspark.__version__}</spark.version>" in pom


def test_broker_pom_pins_the_configured_kafka_version():
    pom = (REPO_ROOT / "deploy" / "maven" / "kafka-broker" / "pom.xml").read_text()
    assert f"<kafka.version>{Settings.from_env(environ={}).kafka_version}</kafka.version>" in pom


def test_settings_survive_the_trip_through_environment_variables():
    s = Settings.from_env(environ={}).replace(topic_alerts="demo.alerts", kafka_ssl_check_hostname=False,
                                              partitions_alerts=3)
    assert Settings.from_env(environ=s.to_env()) == s


def test_event_time_bound_is_the_contracts_and_within_every_watermark():
    """The job's bound on how far event time may lead the broker's clock is the contract's default, and
    a bound longer than a detector's watermark delay is said at start (one record could make traffic late)."""
    from common.contracts import EVENT_TIME_MAX_AHEAD
    from detectors import registry
    from spark_job.parsing import fast_clock_warning

    detectors = registry.all()
    assert Settings.from_env(environ={}).event_time_max_ahead == EVENT_TIME_MAX_AHEAD
    assert fast_clock_warning(EVENT_TIME_MAX_AHEAD.total_seconds(), detectors) is None
    assert fast_clock_warning(86_400, []) is None
    warning = fast_clock_warning(86_400, detectors)
    assert warning.startswith("FRAUD_EVENT_TIME_MAX_AHEAD_S=86400 is more than") and "2 minutes" in warning
