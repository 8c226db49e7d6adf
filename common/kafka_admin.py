"""Topic administration with kafka-python's admin client: what the local stack, the tests and the
Faust services (their tables' changelogs) create and delete. Idempotent."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from common.settings import Settings


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    config: dict[str, str] = field(default_factory=dict)


@contextmanager
def admin_client(settings: Settings, **overrides: Any) -> Iterator[Any]:
    """A kafka-python ``KafkaAdminClient`` from the settings, closed on leaving."""
    from kafka import KafkaAdminClient

    from common.kafka_clients import kafka_python_config

    admin = KafkaAdminClient(**kafka_python_config(settings), **overrides)
    try:
        yield admin
    finally:
        admin.close()


def create_topics(settings: Settings, specs: list[TopicSpec], timeout_ms: int = 30000) -> list[str]:
    """Create the topics that do not exist yet; return the names created."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    from common.kafka_clients import explained_connect_errors

    with explained_connect_errors(settings), admin_client(settings, request_timeout_ms=timeout_ms) as admin:
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
    from kafka.errors import UnknownTopicOrPartitionError

    with admin_client(settings) as admin:
        try:
            admin.delete_topics(names)
        except UnknownTopicOrPartitionError:
            pass


def consumer_group_report(settings: Settings, group_id: str) -> str:
    """One line on a consumer group for a diagnosis: its state, its members' partitions and the lag
    (end offset - committed offset) of every partition with one."""
    from common.kafka_io import make_consumer

    try:
        with admin_client(settings, request_timeout_ms=10000) as admin:
            group = admin.describe_groups([group_id])[group_id]
            committed = admin.list_group_offsets({group_id: None})[group_id]
        consumer = make_consumer(settings, group_id=None)
        try:
            ends = consumer.end_offsets(list(committed))
        finally:
            consumer.close()
    except Exception as error:       # a diagnosis must not hide the finding it diagnoses
        return f"group {group_id}: not described ({error!r})"
    members = [{a["topic"]: a["partitions"] for a in (m.get("member_assignment") or {}).get("assigned_partitions", [])}
               for m in group["members"]]
    lag = {f"{tp.topic}[{tp.partition}]": ends[tp] - meta.offset for tp, meta in committed.items()
           if ends[tp] != meta.offset}
    return f"group {group_id}: {group['group_state']}, members {members or 'none'}, lag {lag or 'none'}"
