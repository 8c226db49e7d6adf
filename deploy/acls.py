"""What each component of the application may do on a secure broker, as Kafka ACLs.

One SCRAM user per component (``broker_security.py``); ``StandardAuthorizer`` denies whatever no ACL
allows. The grants follow the diamond (docs/architecture.md): the producer writes the transactions
(and their labels); the detector job reads them and writes alerts, dead letters and its batch markers
in transactions of its own ids; the enricher and the case manager read and write their topics, in
their consumer groups (the app ids), with the internal topics Faust names after the app id. The
dashboard reads Redis, and writes the analysts' verdicts; the analyst (``python -m detectors params``)
reads and sets detector parameters in transactions of its own ids and reads the transactions and their
labels for a what-if, and the verdicts for ``backtest --verdicts-topic``.

No component may create or delete topics outside its own names: the detector job's rehearsal
(``FRAUD_DETECTOR_WARMUP_S``, a local-profile workaround, off on clusters) needs both for its throw-away
topics, so on a secure broker it is skipped, with one line saying why.
"""

from __future__ import annotations

from dataclasses import dataclass

from common.settings import Settings
from common.waiting import wait_until

COMPONENTS = ("producer", "detectors", "enricher", "cases", "dashboard", "analyst")
SPARK_GROUP_PREFIX = "spark-kafka-source"   # the Kafka source's consumer groups (groupIdPrefix)

TOPIC, GROUP, TRANSACTIONAL_ID = "TOPIC", "GROUP", "TRANSACTIONAL_ID"
LITERAL, PREFIXED = "LITERAL", "PREFIXED"


@dataclass(frozen=True)
class Grant:
    """``operation`` allowed to ``user`` on the resources of ``kind`` named (or prefixed) ``name``."""
    user: str
    kind: str
    name: str
    operation: str
    pattern: str = LITERAL


def _grants(user: str, kind: str, name: str, operations: tuple[str, ...], pattern: str = LITERAL) -> list[Grant]:
    return [Grant(user, kind, name, op, pattern) for op in operations]


def component_grants(component: str, s: Settings) -> list[Grant]:
    """The ACLs of ``component`` for the topic names and app ids of ``s``."""
    read, write = ("READ", "DESCRIBE"), ("WRITE", "DESCRIBE")
    out: list[Grant] = []
    if component == "producer":
        for topic in (s.topic_transactions, s.topic_labels):
            out += _grants(component, TOPIC, topic, write)
    elif component == "detectors":
        out += _grants(component, TOPIC, s.topic_transactions, read)
        for topic in (s.topic_alerts, s.topic_dlq):
            out += _grants(component, TOPIC, topic, write)
        out += _grants(component, TOPIC, s.topic_alert_markers, ("READ", "WRITE", "DESCRIBE"))  # recovery
        out += _grants(component, TOPIC, s.topic_params, read)     # parameters set at run time
        # The exactly-once writer's ids: fraud-writer.<alerts topic>.<query name> (spark_job/alert_writer.py)
        out += _grants(component, TRANSACTIONAL_ID, f"fraud-writer.{s.topic_alerts}.", write, PREFIXED)
        out += _grants(component, GROUP, SPARK_GROUP_PREFIX, read, PREFIXED)
        # The lease of a checkpoint root off local folders: group fraud-leader.<alerts topic>.<root's hash>
        out += _grants(component, TOPIC, s.topic_leader, read)
        out += _grants(component, GROUP, f"fraud-leader.{s.topic_alerts}.", read, PREFIXED)
    elif component in ("enricher", "cases"):
        app_id, source, sink = ((s.enricher_app_id, s.topic_alerts, s.topic_alerts_enriched)
                                if component == "enricher" else
                                (s.cases_app_id, s.topic_alerts_enriched, s.topic_cases))
        out += _grants(component, TOPIC, source, read)
        out += _grants(component, TOPIC, sink, write)
        out += _grants(component, GROUP, app_id, read)
        # Faust's own topics (table changelogs, the assignor's) are named <app id>-...
        out += _grants(component, TOPIC, f"{app_id}-", ("CREATE", "READ", "WRITE", "DESCRIBE",
                                                         "DESCRIBE_CONFIGS"), PREFIXED)
    elif component == "dashboard":
        out += _grants(component, TOPIC, s.topic_verdicts, write)
    elif component == "analyst":
        for topic in (s.topic_params, s.topic_params_history):
            out += _grants(component, TOPIC, topic, ("READ", "WRITE", "DESCRIBE"))
        for topic in (s.topic_transactions, s.topic_labels):       # the what-if over the last hours
            out += _grants(component, TOPIC, topic, read)
        out += _grants(component, TOPIC, s.topic_verdicts, read)  # backtest --verdicts-topic
        # detectors/params_store.py: one transaction per change, id fraud-params.<random>
        out += _grants(component, TRANSACTIONAL_ID, "fraud-params.", write, PREFIXED)
    else:
        raise ValueError(f"no component {component!r}: one of {', '.join(COMPONENTS)}")
    return out


def all_grants(s: Settings) -> list[Grant]:
    return [grant for component in COMPONENTS for grant in component_grants(component, s)]


def apply_acls(admin: Settings, topics: Settings, timeout: float = 30.0) -> int:
    """Create the ACLs of every component for the names in ``topics``, as the admin user of ``admin``
    (an existing ACL is left as it is). Returns how many were asked for."""
    from kafka import KafkaAdminClient
    from kafka.admin import ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType, \
        ResourcePattern, ResourcePatternFilter, ResourceType

    from common.kafka_clients import kafka_python_config

    grants = all_grants(topics)
    acls = [ACL(principal=f"User:{g.user}", host="*", operation=ACLOperation[g.operation],
                permission_type=ACLPermissionType.ALLOW,
                resource_pattern=ResourcePattern(ResourceType[g.kind], g.name, ACLResourcePatternType[g.pattern]))
            for g in grants]
    client = KafkaAdminClient(**kafka_python_config(admin))
    try:
        result = client.create_acls(acls)
        if result["failed"]:
            raise RuntimeError(f"creating {len(result['failed'])} of {len(acls)} ACLs failed: "
                               f"{result['failed'][:3]}")
        # The controller accepted them; the broker enforces them once its metadata has caught up.
        everything = ACLFilter(principal=None, host=None, operation=ACLOperation.ANY,
                               permission_type=ACLPermissionType.ANY,
                               resource_pattern=ResourcePatternFilter(ResourceType.ANY, None,
                                                                      ACLResourcePatternType.ANY))
        wait_until(lambda: set(acls) <= set(client.describe_acls(everything)[0]), timeout,
                   "the broker to enforce the new ACLs", interval=0.2)
    finally:
        client.close()
    return len(acls)
