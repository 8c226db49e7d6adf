"""The one place SparkSessions are built, so every job, test and benchmark runs Spark the same way."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any

from common.cli_errors import UNAVAILABLE, UserError
from common.settings import REPO_ROOT, Settings, get_settings


SPARK_JOB_JVM = REPO_ROOT / "spark_job" / "jvm"
OPERATORS_JAVA = REPO_ROOT / "detectors" / "operators" / "java"     # a second source root of the same jar


def spark_job_sources_digest() -> str:
    """The digest of the job jar's pom and Java sources, written beside the jar when it is built."""
    digest = hashlib.sha256()
    sources = [SPARK_JOB_JVM / "pom.xml", *(SPARK_JOB_JVM / "src").rglob("*.java"), *OPERATORS_JAVA.rglob("*.java")]
    for path in sorted(sources):
        digest.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def job_jar_stamp(jar: Path) -> Path:
    return jar.with_name(jar.name + ".sources")


def job_jar(settings: Settings) -> Path:
    """The job's own jar (``spark_job/jvm``: the contract's validation, and the keyed operators of
    ``detectors/operators/java``), built by ``python -m deploy fetch``; every session has it, the
    detectors' harness too."""
    if not settings.spark_job_jar.exists():
        raise UserError(f"the detector job's jar {settings.spark_job_jar} is not built: "
                        f"run `make up` (or `python -m deploy fetch`) first", UNAVAILABLE)
    stamp = job_jar_stamp(settings.spark_job_jar)     # an image's jar has none: built with its sources
    # A driver run from the cluster's application zip has no sources on disk to compare with.
    if stamp.exists() and SPARK_JOB_JVM.is_dir() and stamp.read_text() != spark_job_sources_digest():
        raise UserError(f"the detector job's jar {settings.spark_job_jar} is older than spark_job/jvm: "
                        f"run `make fetch` (or `python -m deploy fetch`) to build it again", UNAVAILABLE)
    return settings.spark_job_jar


def job_jars(settings: Settings) -> list[Path]:
    """The Spark Kafka connector and its dependencies, and the job's own jar: fetched and built by
    ``python -m deploy fetch``."""
    jars = sorted(settings.spark_jars_dir.glob("*.jar"))
    if not jars:
        raise UserError(f"no Spark Kafka connector jars in {settings.spark_jars_dir}: "
                        f"run `make up` (or `python -m deploy fetch`) first", UNAVAILABLE)
    return [*jars, job_jar(settings)]


# HotSpot leaves methods over 8,000 bytes of bytecode to the interpreter. The validation's generated code was
# one until it became a Java UDF (spark_job/jvm); kept for the generated code of large compiled batches
# (HotSpot's default measured no different in make demo since: docs/performance.md, "Spark settings and why").
JIT_HUGE_METHODS = "-XX:-DontCompileHugeMethods"


def jvm_options(settings: Settings) -> str:
    """The options of every Spark JVM (driver and, on a cluster, executors)."""
    return f"-XX:+Use{settings.spark_gc}GC {JIT_HUGE_METHODS} {settings.spark_jvm_options}".strip()


def session_config(settings: Settings, app_name: str, with_kafka: bool = True,
                   extra: dict[str, Any] | None = None) -> dict[str, str]:
    config = {
        "spark.app.name": app_name,
        "spark.master": settings.spark_master,
        # Spark picks the machine's other address by default: everything stays on loopback.
        "spark.driver.host": settings.spark_driver_host,
        "spark.driver.bindAddress": settings.spark_driver_host,
        "spark.driver.memory": settings.spark_driver_memory,
        "spark.sql.session.timeZone": "UTC",
        # Every micro-batch is planned again. With the runner's validation (about 60 rules over 40
        # columns) under a self-join, inferring filters from constraints cost 3-4 s of planning per
        # batch; without it 1-1.3 s (measured on double_swipe, 50k-row batches). The rule only adds
        # redundant isnotnull filters here, so it is switched off.
        "spark.sql.constraintPropagation.enabled": "false",
        # The runner's shared exchange (spark_job.queries.read_once) carries one struct that every branch of
        # a query reads; pruning its fields per branch would make the branches' exchanges differ, and only
        # identical exchanges are reused: each branch would scan and validate the batch again. Nothing
        # here reads nested columns from files, which is what these two rules are for.
        "spark.sql.optimizer.expression.nestedPruning.enabled": "false",
        "spark.sql.optimizer.nestedSchemaPruning.enabled": "false",
        "spark.sql.codegen.factoryMode": settings.spark_codegen_factory_mode,
        "spark.sql.codegen.cache.maxEntries": str(settings.spark_codegen_cache_entries),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        "spark.sql.warehouse.dir": str(settings.run_dir / "spark-warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={settings.run_dir / 'derby'} {jvm_options(settings)}",
        "spark.executor.extraJavaOptions": jvm_options(settings),
    }
    if settings.spark_shuffle_partitions:         # else the cores, once the session knows them (get_spark)
        config["spark.sql.shuffle.partitions"] = str(settings.spark_shuffle_partitions)
    if settings.spark_python_daemon:
        config["spark.python.daemon.module"] = settings.spark_python_daemon
    config["spark.jars"] = ",".join(str(j) for j in (job_jars(settings) if with_kafka else [job_jar(settings)]))
    config.update({k: str(v) for k, v in (extra or {}).items()})
    return config


def get_spark(app_name: str = "fraud-detection", settings: Settings | None = None,
              with_kafka: bool = True, extra: dict[str, Any] | None = None):
    """A SparkSession for this project (the existing one if this process already has it)."""
    settings = settings or get_settings()
    # Workers must run the interpreter that has pyarrow and pandas, not the system python3.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", settings.spark_driver_host)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in session_config(settings, app_name, with_kafka, extra).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if not settings.spark_shuffle_partitions:     # a cluster: a partition per core (frozen into each checkpoint)
        spark.conf.set("spark.sql.shuffle.partitions", str(spark.sparkContext.defaultParallelism))
    spark.sparkContext.setLogLevel(os.environ.get("FRAUD_SPARK_LOG_LEVEL", "WARN"))
    # The exactly-once writer drops each batch's locally checkpointed rows when it is done with them, and
    # Spark warns at every such unpersist that their lineage is gone: a line per batch that says nothing.
    log4j = spark._jvm.org.apache.logging.log4j
    log4j.core.config.Configurator.setLevel("org.apache.spark.rdd.MapPartitionsRDD", log4j.Level.ERROR)
    return spark
