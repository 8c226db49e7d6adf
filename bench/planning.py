"""What each branch of a query costs to plan: the detector job's query with a chosen set of branches,
one after the other in one JVM, on one topic of simulated transactions, small batches back to back.

    python -m bench.planning double_swipe+impossible_travel+amount_anomaly+velocity+dlq dlq velocity

Each argument is one query: detector names joined by ``+``, ``dlq`` for the dead-letter branch. Prints,
per query and round, the median ``queryPlanning`` and whole batch (ms) over the batches after the first
five. Uses the running local stack (``make up``) and topics of its own, deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid

from bench.workload import publish_values
from common.kafka_admin import TopicSpec, create_topics, delete_topics
from common.settings import get_settings
from common.spark import get_spark
from deploy.local_stack import fetch_spark_jars
from detectors import registry
from producers.simulator import SimConfig, Simulator
from spark_job.options import QueryPlan, RunOptions
from spark_job.queries import start_planned_query

WARM_UP_BATCHES = 5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("queries", nargs="+", help="detectors joined by +, and dlq for the dead letters")
    parser.add_argument("--transactions", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=600, help="records per micro-batch (maxOffsetsPerTrigger)")
    parser.add_argument("--batches", type=int, default=25, help="batches with input per query")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    base = get_settings()
    fetch_spark_jars(base)
    prefix = f"bench.planning.{uuid.uuid4().hex[:6]}"
    settings = base.replace(topic_transactions=prefix, topic_alerts=f"{prefix}.alerts", topic_dlq=f"{prefix}.dlq",
                            topic_alert_markers=f"{prefix}.markers")
    topics = [TopicSpec(prefix, base.partitions_transactions), TopicSpec(f"{prefix}.alerts", 1),
              TopicSpec(f"{prefix}.dlq", 1), TopicSpec(f"{prefix}.markers", 1, {"cleanup.policy": "compact"})]
    create_topics(base, topics)
    try:
        values = [v for batch in Simulator(SimConfig(seed=3, customers=2000)).take(args.transactions)
                  for v in batch.values]
        publish_values(base, prefix, [json.loads(v)["card_id"].encode() for v in values], values)
        spark = get_spark("bench-planning", settings)
        detectors = registry.all()
        for round_ in range(args.rounds):
            for spec in args.queries:
                parts = spec.split("+")
                names = tuple(p for p in parts if p != "dlq")
                plan = QueryPlan(f"planning-{round_}-{'-'.join(parts)}", names, with_dlq="dlq" in parts)
                options = RunOptions(checkpoint_root=tempfile.mkdtemp(prefix="bench-planning-"),
                                     max_offsets_per_trigger=args.batch)
                planning, whole = measure(start_planned_query(spark, plan, detectors, settings, options), args.batches)
                print(f"round {round_} {spec}: queryPlanning p50 {planning} ms, batch p50 {whole} ms", flush=True)
    finally:
        delete_topics(base, [t.name for t in topics])


def measure(query, batches: int, timeout_s: float = 300) -> tuple[float, float]:
    """Median planning and batch time of the query's batches with input, after the warm-up ones."""
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            done = [p for p in query.recentProgress if p["numInputRows"] > 0]
            if len(done) >= batches:
                break
            query.awaitTermination(1)
    finally:
        query.stop()
    kept = done[WARM_UP_BATCHES:] or done
    return (statistics.median(p["durationMs"].get("queryPlanning", 0) for p in kept),
            statistics.median(p["durationMs"]["triggerExecution"] for p in kept))


if __name__ == "__main__":
    main()
