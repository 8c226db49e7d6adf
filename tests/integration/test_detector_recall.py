"""The built-in detectors on the simulator's stream, through the real broker and real Spark.

The simulator's stream (out-of-order jitter and late events on, as by default) is published with the
producers' own ``publish`` to per-test topics; the runner (``start_detectors``: one query per detector
plus the dead-letter query, the exactly-once sink, a per-test checkpoint directory) reads it in several
micro-batches; the alerts are read back with ``read_committed`` and scored with the backtest's ``score``
against the labels. Each built-in detector must reach recall >= 0.95 on its own scenario(s) and precision
>= 0.9.

How the end of the stream is handled: once every query has read the whole stream, a few "watermark tick"
transactions a day after the last event (``harness.watermark_tick``, on a card of their own) move event
time on, so every stateful operator sees a watermark past the stream's end; the test then waits until every
query has run with a watermark past the stream's end. Polling with deadlines, no sleeps.

How recall treats late events: transactions labelled ``late`` arrive minutes after newer ones. Those that
land behind the watermark are dropped by Spark by design (and counted in ``numRowsDroppedByWatermark``), so
late-labelled fraud transactions are left out of the recall denominators (``score(recall_excludes=...)``);
how many there were, and how many were detected anyway, is reported. Everything else counts, including
fraud whose evidence partner was late. Precision is over every alert, judged by its trigger's label.

Size and cost: 60,000 transactions of 2,000 customers (about 11 days of event time, so cards build the
history amount_anomaly needs), with card testing and amount spikes at twice their default rate and
impossible travel at 1.5 times, so every scenario has at least 40 incidents. The runner reads 30,000
offsets per micro-batch (two data batches, then the ticks): on local[2] a micro-batch of the four queries
costs seconds of fixed overhead whatever its size, so fewer, larger batches keep the test short. The
dead-letter query is left out (another query on the same 2 cores); instead every detector query's
validation metrics must show no invalid record.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from common.kafka_io import make_consumer, make_producer, read_topic
from common.waiting import wait_until
from detectors import backtest, harness, registry
from spark_job.queries import RunOptions, query_name, start_detectors
from producers.simulate import publish
from producers.simulator import SimConfig, Simulator
from tests.detectors_for_tests import BUILT_IN

pytestmark = pytest.mark.slow           # ~3 minutes: make test-slow (the e2e suite checks recall on a shorter stream)

SEED = 7
CUSTOMERS = 2_000
COUNT = 60_000
RATES = {"card_testing": 0.001, "amount_spike": 0.002, "impossible_travel": 0.0015}
MAX_OFFSETS_PER_TRIGGER = 30_000
MIN_INCIDENTS = 40
MIN_RECALL, MIN_PRECISION = 0.95, 0.9
INCIDENT_SIZE = {"card_testing": 5}      # a card-testing incident is a burst of at least 5 charges
READ_TIMEOUT_S = 300.0                   # generous: the 2 cores are shared with other work


def test_built_in_detectors_reach_recall_and_precision_on_the_simulated_stream(stack, topics, spark, tmp_path,
                                                                              unique):
    started = time.monotonic()
    s = stack.replace(topic_transactions=topics("transactions", partitions=12), topic_alerts=topics("alerts", 4),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"))
    detectors = [registry.get(name) for name in BUILT_IN]

    # The stream, published as `python -m producers simulate` would, with every label to a file.
    sim = Simulator(SimConfig(seed=SEED, customers=CUSTOMERS, rates=RATES))
    batches = list(sim.take(COUNT))
    labels_file = tmp_path / "labels.jsonl"
    stats = publish(sim, s, s.topic_transactions, count=COUNT, labels_file=labels_file, batches=batches)
    assert stats.sent == COUNT and stats.failed == 0, stats.summary()
    labels = backtest.load_labels(labels_file)
    assert len(labels) == COUNT
    _assert_enough_incidents(labels, detectors)

    last_event = datetime.fromtimestamp(max(int(b.event_ms.max()) for b in batches if len(b)) / 1000, timezone.utc)
    ticks = [last_event + timedelta(hours=1), last_event + timedelta(days=1)]
    # The contract rejects event times ahead of the broker's clock (EVENT_TIME_MAX_AHEAD).
    assert ticks[-1] < datetime.now(timezone.utc)
    data_end = _end_offsets(s, s.topic_transactions)

    queries = start_detectors(spark, detectors, s, RunOptions(checkpoint_root=tmp_path / "checkpoints",
                                                              max_offsets_per_trigger=MAX_OFFSETS_PER_TRIGGER,
                                                              with_dlq=False))
    by_name = {q.name: q for q in queries}
    try:
        # 1. Every query has read the whole stream; only then move event time on (earlier, the ticks
        #    could overtake data still unread in other partitions and make it late).
        wait_until(lambda: all(_read_up_to(by_name[query_name(d)], data_end) for d in detectors),
                   READ_TIMEOUT_S, "every detector query to read the whole stream", interval=0.5)
        producer = make_producer(s)
        for at in ticks:
            tick = harness.watermark_tick(at)
            producer.send(s.topic_transactions, key=tick["card_id"], value=json.dumps(tick).encode())
        producer.flush()
        producer.close()
        final_end = _end_offsets(s, s.topic_transactions)

        # 2. Every query has run with a watermark past the end of the stream: all windows closed.
        def flushed(detector) -> bool:
            query = by_name[query_name(detector)]
            past = harness.format_event_time(ticks[-1] - detector.watermark_delay)
            return _read_up_to(query, final_end) and any(
                ((p.get("eventTime") or {}).get("watermark") or "") >= past for p in _progress(query))

        wait_until(lambda: all(flushed(d) for d in detectors), 120, "the watermark to pass the stream's end",
                   interval=0.5)
        dropped = {d.name: sum(op.get("numRowsDroppedByWatermark", 0) or 0
                               for p in _progress(by_name[query_name(d)]) for op in p.get("stateOperators") or [])
                   for d in detectors}
        validation = {d.name: _validation_totals(by_name[query_name(d)]) for d in detectors}
        alerts = [json.loads(r.value) for r in read_topic(s, s.topic_alerts, timeout=60)]
    finally:
        for query in queries:
            query.stop()

    for name, (records, invalid) in validation.items():
        # (a self-joining detector reads the source twice, so records may count each one twice)
        assert records >= COUNT + len(ticks) and invalid == 0, (name, records, invalid)
    assert len({a["alert_id"] for a in alerts}) == len(alerts), "exactly once: no alert twice"
    late_fraud = {t for t, label in labels.items() if label.get("is_fraud") and label.get("late")}
    report = backtest.score(detectors, alerts, labels, recall_excludes=late_fraud)
    report["rows_dropped_by_watermark"] = dropped
    report["runtime_seconds"] = round(time.monotonic() - started, 1)
    print("\n" + backtest.markdown(report) + f"\nrows dropped by the watermark: {dropped}; "
          f"late fraud left out of recall: {report.get('excluded_from_recall', {})}; "
          f"{report['runtime_seconds']} s")
    (tmp_path / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))

    failures = []
    for detector in detectors:
        d = report["detectors"][detector.name]
        if d["recall"] is None or d["recall"] < MIN_RECALL:
            failures.append(f"{detector.name}: recall {d['recall']} on {list(detector.scenarios)}")
        for scenario in detector.scenarios:
            own = d["per_scenario"][scenario]
            if own["recall"] is None or own["recall"] < MIN_RECALL:
                failures.append(f"{detector.name}: recall {own['recall']} on {scenario}")
        if d["precision"] is None or d["precision"] < MIN_PRECISION:
            failures.append(f"{detector.name}: precision {d['precision']} ({d['false_positives']} false positives)")
    assert not failures, failures


def _assert_enough_incidents(labels: dict[str, dict], detectors) -> None:
    for detector in detectors:
        for scenario in detector.scenarios:
            fraud = sum(1 for label in labels.values() if label.get("is_fraud") and label.get("scenario") == scenario)
            assert fraud >= MIN_INCIDENTS * INCIDENT_SIZE.get(scenario, 1), (scenario, fraud)


def _end_offsets(settings, topic: str) -> dict[str, int]:
    from kafka import TopicPartition

    consumer = make_consumer(settings, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
        return {str(tp.partition): offset for tp, offset in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def _progress(query) -> list[dict]:
    harness.raise_if_failed(query)
    return [json.loads(p.json) for p in query.recentProgress]


def _validation_totals(query) -> tuple[int, int]:
    """(records, invalid records) the runner's validation counted over the query's batches."""
    records = invalid = 0
    for progress in _progress(query):
        for metrics in (progress.get("observedMetrics") or {}).values():
            records += int(metrics.get("records") or 0)
            invalid += int(metrics.get("invalid") or 0)
    return records, invalid


def _read_up_to(query, end: dict[str, int]) -> bool:
    """The query has finished a micro-batch whose source end offsets reach ``end``."""
    for progress in reversed(_progress(query)):
        for source in progress.get("sources") or []:
            offsets = source.get("endOffset")
            offsets = json.loads(offsets) if isinstance(offsets, str) else offsets
            for per_partition in (offsets or {}).values():
                if all(int(per_partition.get(p, -1)) >= o for p, o in end.items()):
                    return True
    return False
