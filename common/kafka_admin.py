"""Topic administration with kafka-python's admin client: what the local stack, the tests and the
Faust services (their tables' changelogs) create and delete. Idempotent."""

from __future__ import annotations

from dataclasses import dataclass, field

from common.settings import Settings


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


def create_topics(settings: Settings, specs: list[TopicSpec], timeout_ms: int = 30000) -> list[str]:
    """Create the topics that do not exist yet; return the names created."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    from common.kafka_clients import explained_connect_errors, kafka_python_config

    with explained_connect_errors(settings):
        admin = KafkaAdminClient(**kafka_python_config(settings), request_timeout_ms=timeout_ms)
    try:
        existing = set(admin.list_topics())
        missing = [spec for spec in specs if spec.name not in existing]
        if missing:
            try:
                admin.create_topics([NewTopic(spec.name, spec.partitions, settings.replication_factor,
                                              topic_configs=spec.config) for spec in missing],
                                    timeout_ms=timeout_ms)
            except TopicAlreadyExistsError:
                pass  # created concurrently by another process: the goal is reached
        return [spec.name for spec in missing]
    finally:
        admin.close()


def wait_for_partitions(settings: Settings, specs: list[TopicSpec], timeout: float = 30.0) -> None:
    """Until the broker's metadata shows every topic of ``specs`` with its partitions."""
    from common.kafka_io import make_consumer
    from common.waiting import wait_until

    consumer = make_consumer(settings, group_id=None)
    try:
        def visible() -> bool:
            consumer.topics()          # a fresh metadata request for every topic
            return all(len(consumer.partitions_for_topic(spec.name) or ()) >= spec.partitions for spec in specs)
        wait_until(visible, timeout, "topics " + ", ".join(spec.name for spec in specs) + " in the metadata")
    finally:
        consumer.close()


def delete_topics(settings: Settings, names: list[str]) -> None:
    if not names:
        return
    from kafka import KafkaAdminClient
    from kafka.errors import UnknownTopicOrPartitionError

    from common.kafka_clients import kafka_python_config

    admin = KafkaAdminClient(**kafka_python_config(settings))
    try:
        admin.delete_topics(names)
    except UnknownTopicOrPartitionError:
        pass
    finally:
        admin.close()
