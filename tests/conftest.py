"""Shared fixtures. Markers come from the folder: tests/unit -> unit, tests/integration -> integration,
tests/e2e -> e2e. Service fixtures start the embedded local stack on demand (once per session) and
stop it at the end if they started it; each test gets its own topics and consumer groups."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from common.settings import Settings

TESTS_DIR = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        kind = Path(str(item.fspath)).relative_to(TESTS_DIR).parts[0]
        if kind in {"unit", "integration", "e2e"}:
            item.add_marker(getattr(pytest.mark, kind))


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
    from deploy.topics import TopicSpec, create_topics, delete_topics

    created: list[str] = []

    def make(base: str, partitions: int = 1, **config: str) -> str:
        name = f"test.{base}.{unique}.{len(created)}"
        create_topics(stack, [TopicSpec(name, partitions, dict(config))])
        created.append(name)
        return name

    yield make
    delete_topics(stack, created)


@pytest.fixture(scope="session")
def spark(stack):
    from common.spark import get_spark

    session = get_spark("tests", stack)
    yield session
    session.stop()


@pytest.fixture
def redis_client(stack, unique):
    """A Redis client; keys this test wrote under its ``unique`` prefix are removed after."""
    import redis

    client = redis.Redis.from_url(stack.redis_url, decode_responses=True)
    yield client
    for key in client.scan_iter(match=f"*{unique}*"):
        client.delete(key)
    client.close()
