"""The project's SparkSession as the Python workers see it."""

from __future__ import annotations


def _worker_has_lazy_zip_reset(_):
    import zipimport

    return bool(getattr(zipimport.zipimporter, "_fraud_lazy_reset", False))


def _daemon_mapped(_):
    """Which of pyarrow's and scikit-learn's native libraries the worker's parent, the daemon, has loaded."""
    import os

    with open(f"/proc/{os.getppid()}/maps") as maps:
        text = maps.read()
    return sorted(name for name in ("libarrow", "sklearn/") if name in text)


def test_python_workers_start_from_the_project_daemon(spark):
    """Every Python task runs in a worker forked from common/pyspark_daemon.py (spark.python.daemon.module)."""
    assert spark.sparkContext.parallelize([0, 1], 2).map(_worker_has_lazy_zip_reset).collect() == [True, True]


def test_the_daemon_imports_the_pandas_stack_before_it_forks(spark):
    """A worker forked mid-traffic finds pandas, pyarrow and scikit-learn already in memory."""
    assert spark.sparkContext.parallelize([0, 1], 2).map(_daemon_mapped).collect() == [["libarrow", "sklearn/"]] * 2


def test_the_jvm_compiles_huge_generated_methods(spark):
    """The validation's generated code is a huge method: without the flag HotSpot would interpret it."""
    from common.spark import JIT_HUGE_METHODS

    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert JIT_HUGE_METHODS in list(runtime.getInputArguments())


def test_the_session_takes_its_codegen_factory_mode_from_the_settings(spark, settings):
    """NO_CODEGEN by default: no eviction predicate generated and compiled again every micro-batch."""
    assert settings.spark_codegen_factory_mode == "NO_CODEGEN"
    assert spark.conf.get("spark.sql.codegen.factoryMode") == settings.spark_codegen_factory_mode


def test_the_jvm_runs_the_collector_of_the_settings(spark, settings):
    """FRAUD_SPARK_GC, G1 by default (the JVM's own)."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    collectors = {bean.getName() for bean in management.getGarbageCollectorMXBeans()}
    expected = {"Parallel": {"PS Scavenge", "PS MarkSweep"}, "G1": {"G1 Young Generation", "G1 Old Generation"}}
    assert expected[settings.spark_gc] <= collectors


def test_a_compiled_micro_batch_reuses_the_classes_of_the_one_before(stack, topics, spark, tmp_path):
    """spark.sql.codegen.cache.maxEntries (FRAUD_SPARK_CODEGEN_CACHE_ENTRIES): the shared query of the four
    built-in detectors, compiled, needs about 80 generated classes for a batch with data and 65 more for a
    batch without (the watermark's). With Spark's default cache of 100 the least recently used were
    gone before the next batch needed them, and every batch compiled them again; with room for them, a
    batch only compiles those that embed its watermark."""
    from bench.workload import Workload, generate
    from common.kafka_io import make_producer
    from detectors import registry
    from spark_job.queries import RunOptions, start_detectors
    from tests.detectors_for_tests import BUILT_IN

    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(stack.spark_codegen_cache_entries)
    s = stack.replace(topic_transactions=topics("transactions", partitions=2), topic_alerts=topics("alerts", 2),
                      topic_dlq=topics("dlq"), topic_alert_markers=topics("markers", cleanup__policy="compact"),
                      spark_codegen_large_batch_rows=0)   # no switching: every batch runs as the query started
    compilations = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    producer = make_producer(s)
    spark.conf.set("spark.sql.codegen.factoryMode", "FALLBACK")     # the query's session is a copy made at start
    try:
        [query] = start_detectors(spark, [registry.get(name) for name in BUILT_IN], s,
                                  RunOptions(checkpoint_root=tmp_path, shared=True))
    finally:
        spark.conf.set("spark.sql.codegen.factoryMode", stack.spark_codegen_factory_mode)
    # the benchmark's mix: card-present and online, double swipes, card-testing bursts; 400 records a round
    keys, values, _ = generate(Workload(count=2_400, cards=50, swipe_rate=0.05, burst_rate=0.01))
    per_round = []
    try:
        for round_ in range(6):
            records = slice(round_ * 400, (round_ + 1) * 400)
            for key, value in zip(keys[records], values[records]):
                producer.send(s.topic_transactions, key=key, value=value)
            producer.send(s.topic_transactions, key=b"card-x", value=b"{not json")   # and a dead letter
            producer.flush()
            before = compilations.getCount()
            query.processAllAvailable()
            per_round.append(compilations.getCount() - before)
    finally:
        query.stop()
        producer.close()
    # Measured: [144, 11, 11, 11, 20, 13] (20: a round read in two batches); with Spark's default of 100
    # entries [146, 120, 118, 121, 134, 126].
    first = per_round[0]
    assert first >= 50 and max(per_round[-3:]) * 3 < first, per_round


def test_the_writers_unpersist_warning_is_silenced_and_nothing_else(spark):
    """Each batch's staged rows are unpersisted on purpose; other Spark warnings keep the session's level."""
    manager = spark._jvm.org.apache.logging.log4j.LogManager
    assert manager.getLogger("org.apache.spark.rdd.MapPartitionsRDD").getLevel().toString() == "ERROR"
    assert manager.getLogger("org.apache.spark.rdd.RDD").getLevel().toString() == "WARN"
