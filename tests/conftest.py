"""Shared fixtures. Markers come from the folder: tests/unit -> unit, tests/integration -> integration,
tests/e2e -> e2e, tests/cluster -> cluster (run only with FRAUD_CLUSTER_TESTS=1: ``make e2e-cluster``);
tests marked ``slow`` run only with FRAUD_SLOW_TESTS=1
(``make test-slow``), to keep ``make test`` short. Service fixtures start the embedded local stack on demand (once per session) and
stop it at the end if they started it; each test gets its own topics and consumer groups."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from common.settings import Settings

TESTS_DIR = Path(__file__).resolve().parent


KINDS = ("unit", "integration", "e2e")   # the order they run in


def _kind(item) -> str:
    return Path(str(item.fspath)).relative_to(TESTS_DIR).parts[0]


def pytest_collection_modifyitems(config, items):
    run_slow = os.environ.get("FRAUD_SLOW_TESTS") == "1"
    run_cluster = os.environ.get("FRAUD_CLUSTER_TESTS") == "1"
    for item in items:
        kind = _kind(item)
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))
        if kind == "cluster":
            item.add_marker(pytest.mark.cluster)
            if not run_cluster:
                item.add_marker(pytest.mark.skip(reason="a cluster run, left to make e2e-cluster (FRAUD_CLUSTER_TESTS=1)"))
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="a slow run, left to make test-slow (FRAUD_SLOW_TESTS=1)"))
    # Unit tests first, before any session fixture has started a broker or a Spark JVM that would
    # compete with them for the two cores; a stable sort keeps each module's tests together.
    items.sort(key=lambda item: KINDS.index(_kind(item)) if _kind(item) in KINDS else len(KINDS))


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings.from_env()


@pytest.fixture(scope="session")
def stack(settings):
    """The local stack (Kafka + Redis), started if it is not running, stopped after if we started it."""
    from deploy import local_stack

    already_up = local_stack.broker_ready(settings) and local_stack.redis_ready(settings)
    if not already_up:
        local_stack.up(settings, log=lambda _msg: None)
    yield settings
    if not already_up and os.environ.get("FRAUD_KEEP_STACK") != "1":
        local_stack.down(settings, log=lambda _msg: None)


@pytest.fixture
def unique():
    """A short unique suffix for topic names, consumer groups and transactional ids of one test."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def topics(stack, unique):
    """Create topics private to this test: ``topics("transactions", partitions=12)`` -> name."""
    from common.kafka_admin import TopicSpec, create_topics, delete_topics

    created: list[str] = []

    def make(base: str, partitions: int = 1, **config: str) -> str:
        """Topic configs as keyword arguments with dots written as double underscores."""
        name = f"test.{base}.{unique}.{len(created)}"
        configs = {key.replace("__", "."): value for key, value in config.items()}
        create_topics(stack, [TopicSpec(name, partitions, configs)])
        created.append(name)
        return name

    yield make
    delete_topics(stack, created)


@pytest.fixture(scope="session")
def spark(settings):
    """One local[2] SparkSession (with the Kafka connector on its classpath) for the whole run."""
    from common.spark import get_spark
    from deploy.local_stack import fetch_spark_jars

    fetch_spark_jars(settings)
    session = get_spark("tests", settings)
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def no_streaming_query_left_running(request):
    """A query a test leaves running keeps a core busy for the rest of the session: stop it and fail."""
    yield
    if "spark" not in request.fixturenames:
        return
    active = request.getfixturevalue("spark").streams.active
    for query in active:
        query.stop()
    assert not active, f"the test left streaming queries running: {[q.name or str(q.id) for q in active]}"


def _kafka_producer_threads() -> set[str]:
    import threading

    return {t.name for t in threading.enumerate()
            if t.name.startswith("kafka-python-producer-") and t.name.endswith("-network-thread")}


@pytest.fixture(autouse=True)
def no_kafka_producer_left_open():
    """A producer a test leaves open keeps its network thread for the rest of the session, and once the
    test's topics are deleted it refreshes their metadata in a loop: 21 of them took more than one of
    the two cores in a whole run (docs/performance.md, "How long the tests take"). Fail the test."""
    from common.waiting import wait_until

    before = _kafka_producer_threads()
    yield
    try:   # a stopped query's writer closes on Spark's listener bus, a moment after the stop
        wait_until(lambda: not (_kafka_producer_threads() - before), 30, "the test's Kafka producers to close")
    except TimeoutError:
        pytest.fail(f"the test left Kafka producers open: {sorted(_kafka_producer_threads() - before)}",
                    pytrace=False)


@pytest.fixture
def private_broker(settings, tmp_path_factory):
    """A second, throw-away Kafka broker on its own ports and data folder, for tests that stop,
    restart or break the broker without disturbing the shared one. Yields its ``Settings``; the
    ``KafkaBroker`` handle is ``private_broker.broker``."""
    from deploy.local_stack import KafkaBroker, free_ports
    from deploy.topics import create_project_topics

    port = free_ports(29092, 29192, width=2)
    private = settings.replace(kafka_bootstrap=f"127.0.0.1:{port}", local_kafka_controller_port=port + 1,
                               run_dir=tmp_path_factory.mktemp("private-broker"), local_kafka_heap="512m")
    broker = KafkaBroker(private)
    broker.up()
    create_project_topics(private)
    try:
        yield PrivateBroker(private, broker)
    finally:
        broker.stop()


class PrivateBroker:
    def __init__(self, settings, broker):
        self.settings = settings
        self.broker = broker


@pytest.fixture(scope="module")
def secure_broker(settings, tmp_path_factory):
    """A throw-away broker built like ``private_broker`` whose client listener is SASL_SSL only
    (SCRAM-SHA-512 users and a CA generated at start, see deploy/broker_security.py). Yields the
    client ``Settings``: bootstrap, security protocol, mechanism, user name, password and CA file.
    No topics: tests create their own."""
    from deploy.local_stack import KafkaBroker, free_ports

    port = free_ports(29192, 29292, width=2)
    private = settings.replace(kafka_bootstrap=f"127.0.0.1:{port}", local_kafka_controller_port=port + 1,
                               run_dir=tmp_path_factory.mktemp("secure-broker"), local_kafka_heap="512m")
    broker = KafkaBroker(private, secure=True)
    broker.up()
    try:
        yield broker.client_settings
    finally:
        broker.stop()


@pytest.fixture
def redis_client(stack, unique):
    """A Redis client; keys this test wrote under its ``unique`` prefix are removed after."""
    from common.redis_clients import redis_client

    client = redis_client(stack, decode_responses=True)
    yield client
    for key in client.scan_iter(match=f"*{unique}*"):
        client.delete(key)
    client.close()
