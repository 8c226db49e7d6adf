"""A query that catches up runs compiled code, one that keeps up runs interpreted
(spark_job.tuning.codegen.CodegenByBatchSize).

Real broker and Spark: the shared query of a test detector gets two large micro-batches, then two small
ones, and the plan of each batch shows whether whole-stage code generation was on (``*(n)`` before an
operator), which ``spark.sql.codegen.factoryMode=NO_CODEGEN`` turns off. Each batch's records are one
Kafka transaction on a one-partition topic, so the ``read_committed`` query sees each round whole: one
round, one micro-batch.
"""

from __future__ import annotations

import json

from common.kafka_io import make_producer
from common.waiting import wait_until
from spark_job.progress import summarize_progress
from spark_job.queries import RunOptions, start_detectors
from tests.detectors_for_tests import BIG_AMOUNT
from tests.builders import encode, txn


def test_large_batches_run_compiled_and_small_ones_interpreted(stack, topics, spark, tmp_path):
    s = stack.replace(topic_transactions=topics("transactions", partitions=1), topic_alerts=topics("alerts"),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"),
                      spark_codegen_factory_mode="NO_CODEGEN", spark_codegen_large_batch_rows=100)
    producer = make_producer(s, transactional_id=f"test-codegen-{tmp_path.name}")
    producer.init_transactions()
    [query] = start_detectors(spark, [BIG_AMOUNT], s, RunOptions(checkpoint_root=tmp_path, shared=True))
    sent = 0

    def one_batch(records: int) -> str:
        """Publish ``records`` transactions, wait until the query has read them, return its last plan."""
        nonlocal sent
        sent = _publish(producer, s, sent, records)
        wait_until(lambda: _read_so_far(query) >= sent, 120, f"the query to read {sent} records")
        return query._jsq.explainInternal(False)

    try:
        large = [one_batch(300) for _ in range(2)]
        small = [one_batch(5) for _ in range(2)]
    finally:
        query.stop()
        producer.close()
    compiled = ["*(" in plan for plan in large + small]
    # the first batch runs with the configured mode; each batch decides how the next one runs
    assert compiled == [False, True, True, False], compiled


def _publish(producer, s, sent: int, records: int) -> int:
    """``records`` more transactions in one Kafka transaction (a ``read_committed`` query sees them whole);
    returns how many are out now."""
    producer.begin_transaction()
    for i in range(sent, sent + records):
        value = txn(i, amount=12.0)
        producer.send(s.topic_transactions, key=value["card_id"], value=encode(value))
    producer.commit_transaction()
    return sent + records


def _read_so_far(query) -> int:
    progress = query._jsq.lastProgress()
    return summarize_progress(json.loads(progress.json()))["end_offset_total"] if progress is not None else 0


def test_small_batches_are_written_as_one_task_and_large_ones_keep_their_partitions(spark, settings):
    """Each of a batch's partitions is a task that deserializes the whole stage; a small batch gains nothing
    from a second one on two busy cores, a large one does."""
    from spark_job.tuning.codegen import CodegenByBatchSize

    tasks: list[int] = []
    by_size = CodegenByBatchSize(lambda df, batch_id: tasks.append(df.rdd.getNumPartitions()),
                                 settings.replace(spark_codegen_large_batch_rows=100), "test", "unused")
    frame = spark.range(50).repartition(5)
    before = spark.conf.get("spark.sql.codegen.factoryMode")
    try:
        for batch_id, rows in enumerate([5, 500, 500, 5, 5]):      # what each batch read
            by_size.input_rows = lambda batch_id, rows=rows: rows
            by_size(frame, batch_id)
    finally:
        spark.conf.set("spark.sql.codegen.factoryMode", before)
    # the first batch is taken as small; each batch decides for the next one
    assert tasks == [1, 1, 5, 5, 1]


def test_a_query_that_starts_behind_runs_its_first_batch_compiled(stack, topics, spark, tmp_path):
    """A restart with a backlog (or the batch a killed job had planned) is a large first batch: the query's
    own session starts in the mode of its size (spark_job.tuning.backlog), not in the small batches' mode."""
    s = stack.replace(topic_transactions=topics("transactions", partitions=1), topic_alerts=topics("alerts"),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"),
                      spark_codegen_factory_mode="NO_CODEGEN", spark_codegen_large_batch_rows=100)
    producer = make_producer(s, transactional_id=f"test-codegen-start-{tmp_path.name}")
    producer.init_transactions()
    options = RunOptions(checkpoint_root=tmp_path, shared=True)
    sent = 0

    def first_plan(before_start: int, after_start: int) -> str:
        """Publish ``before_start`` records, start the query, publish ``after_start`` more; the plan of the
        batch that read them."""
        nonlocal sent
        sent = _publish(producer, s, sent, before_start) if before_start else sent
        [query] = start_detectors(spark, [BIG_AMOUNT], s, options)
        try:
            sent = _publish(producer, s, sent, after_start) if after_start else sent
            wait_until(lambda: _read_so_far(query) >= sent, 120, f"the query to read {sent} records")
            return query._jsq.explainInternal(False)
        finally:
            query.stop()

    before = spark.conf.get("spark.sql.codegen.factoryMode")
    try:
        small = first_plan(0, 5)          # a new query: its first batch is small
        behind = first_plan(300, 0)       # the job was away while 300 records arrived
        assert spark.conf.get("spark.sql.codegen.factoryMode") == before    # the job's session is left as it was
    finally:
        producer.close()
    assert "*(" not in small and "*(" in behind
