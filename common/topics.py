"""The project's topics and their partition counts and configs (docs/architecture.md, "The diamond"): what
``deploy.topics`` creates, and what the detector job's warm-up creates under its own names."""

from __future__ import annotations

from common.kafka_admin import TopicSpec
from common.settings import Settings


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
        # The parameters in force per detector (detectors/params_store.py): compaction keeps the latest
        # set of each; the history topic keeps every change (never deleted) for `params history`.
        TopicSpec(s.topic_params, 1, {"cleanup.policy": "compact"}),
        TopicSpec(s.topic_params_history, 1, {"cleanup.policy": "delete", "retention.ms": "-1"}),
        # One verdict per case (sinks/dashboard/verdicts.py): compaction keeps a case's latest.
        TopicSpec(s.topic_verdicts, s.partitions_alerts, {"cleanup.policy": "compact"}),
        # The detector job's lease off local folders (spark_job.leadership): a consumer group's one partition.
        TopicSpec(s.topic_leader, 1),
    ]
