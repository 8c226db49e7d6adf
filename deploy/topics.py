"""The project's topics with the partition counts of design.md, created idempotently."""

from __future__ import annotations

from dataclasses import dataclass, field

from common.settings import Settings


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


def project_topics(settings: Settings) -> list[TopicSpec]:
    s = settings
    return [
        TopicSpec(s.topic_transactions, s.partitions_transactions),
        TopicSpec(s.topic_labels, s.partitions_transactions),
        TopicSpec(s.topic_dlq, s.partitions_dlq),
        TopicSpec(s.topic_alerts, s.partitions_alerts),
        TopicSpec(s.topic_alerts_enriched, s.partitions_alerts),
        TopicSpec(s.topic_cases, s.partitions_alerts),
        # The exactly-once writer's last committed batch id per detector: one key per detector,
        # so compaction keeps the topic tiny forever.
        TopicSpec(s.topic_alert_markers, 1, {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}),
    ]


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


def create_project_topics(settings: Settings) -> list[str]:
    return create_topics(settings, project_topics(settings))


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
