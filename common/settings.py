"""Every setting of the project, in one place.

Each field has a default that works with the embedded local stack (``make up``) and names the
environment variable that overrides it, so nothing else in the code base hard-codes a host, a port,
a topic or a path. Read the settings with ``get_settings()``; tests build their own ``Settings`` with
``Settings.from_env(overrides)``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

REPO_ROOT = Path(__file__).resolve().parent.parent


def _env(name: str, default: Any) -> Any:
    """A dataclass field whose value comes from the environment variable ``name``."""
    return field(default=default, metadata={"env": name})


@dataclass(frozen=True)
class Settings:
    # --- Kafka ---------------------------------------------------------------------------------
    kafka_bootstrap: str = _env("FRAUD_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    kafka_security_protocol: str = _env("FRAUD_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT")
    kafka_sasl_mechanism: str = _env("FRAUD_KAFKA_SASL_MECHANISM", "")  # e.g. SCRAM-SHA-512
    kafka_sasl_username: str = _env("FRAUD_KAFKA_SASL_USERNAME", "")
    kafka_sasl_password: str = _env("FRAUD_KAFKA_SASL_PASSWORD", "")
    kafka_ssl_cafile: str = _env("FRAUD_KAFKA_SSL_CAFILE", "")
    kafka_ssl_check_hostname: bool = _env("FRAUD_KAFKA_SSL_CHECK_HOSTNAME", True)

    # --- Topics (names and partition counts: docs/architecture.md, "The diamond") -----------------
    topic_transactions: str = _env("FRAUD_TOPIC_TRANSACTIONS", "transactions")
    topic_labels: str = _env("FRAUD_TOPIC_LABELS", "transactions.labels")
    topic_dlq: str = _env("FRAUD_TOPIC_DLQ", "transactions.dlq")
    topic_alerts: str = _env("FRAUD_TOPIC_ALERTS", "alerts")
    topic_alert_markers: str = _env("FRAUD_TOPIC_ALERT_MARKERS", "alerts.markers")
    topic_alerts_enriched: str = _env("FRAUD_TOPIC_ALERTS_ENRICHED", "alerts.enriched")
    topic_cases: str = _env("FRAUD_TOPIC_CASES", "cases")
    # Each detector's parameters in force (compacted, key = detector) and every change (kept forever)
    topic_params: str = _env("FRAUD_TOPIC_PARAMS", "detectors.params")
    topic_params_history: str = _env("FRAUD_TOPIC_PARAMS_HISTORY", "detectors.params.history")
    # Analysts' verdicts on cases (compacted, key = case_id: the latest verdict of a case wins)
    topic_verdicts: str = _env("FRAUD_TOPIC_VERDICTS", "cases.verdicts")
    # The detector job's lease where no file lock holds it (spark_job.leadership): one partition, no records
    topic_leader: str = _env("FRAUD_TOPIC_LEADER", "detectors.leader")
    partitions_transactions: int = _env("FRAUD_PARTITIONS_TRANSACTIONS", 12)
    partitions_alerts: int = _env("FRAUD_PARTITIONS_ALERTS", 6)
    partitions_dlq: int = _env("FRAUD_PARTITIONS_DLQ", 3)
    replication_factor: int = _env("FRAUD_REPLICATION_FACTOR", 1)

    # --- Redis ---------------------------------------------------------------------------------
    redis_url: str = _env("FRAUD_REDIS_URL", "redis://127.0.0.1:16379/0")  # rediss://... for TLS
    redis_password: str = _env("FRAUD_REDIS_PASSWORD", "")  # Redis AUTH (requirepass); wins over one in the URL

    # --- Downstream Faust services and the dashboard ------------------------------------------
    enricher_app_id: str = _env("FRAUD_ENRICHER_APP_ID", "fraud-enricher")   # = its consumer group
    cases_app_id: str = _env("FRAUD_CASES_APP_ID", "fraud-cases")
    sinks_namespace: str = _env("FRAUD_SINKS_NAMESPACE", "fraud")            # prefix of their Redis keys
    enricher_dedup_ttl: int = _env("FRAUD_ENRICHER_DEDUP_TTL", 7 * 24 * 3600)  # seconds an alert_id is remembered
    dashboard_host: str = _env("FRAUD_DASHBOARD_HOST", "127.0.0.1")
    dashboard_port: int = _env("FRAUD_DASHBOARD_PORT", 8765)
    # Host names it answers besides 127.0.0.1, localhost, ::1 (comma-separated): DNS rebinding
    dashboard_allowed_hosts: str = _env("FRAUD_DASHBOARD_ALLOWED_HOSTS", "")

    # --- The detector job ------------------------------------------------------------------------
    # Detectors sharing a query pay its per-batch costs once (docs/performance.md, "Choices that shaped the
    # job"); a detector in no group runs in a query of its own. python -m detectors run --groups overrides it.
    detector_groups: str = _env("FRAUD_DETECTOR_GROUPS",
                                "rules=double_swipe,impossible_travel,amount_anomaly,velocity;ml=ml_score")
    # A group's query starts a micro-batch every so many seconds instead of as soon as the last one ended:
    # ml_score's query, running back to back, took half of what two cores give the rule detectors' query
    # (docs/performance.md, "Real time in make demo"). python -m detectors run --group-triggers overrides it.
    detector_group_triggers: str = _env("FRAUD_DETECTOR_GROUP_TRIGGERS", "ml=3")
    # Seconds the detector job rehearses its queries on throw-away topics with sample transactions before
    # its own start (spark_job/tuning/rehearsal.py), so the first live batches do not pay the JVM's and the Python
    # workers' first runs (docs/performance.md, "A warm job"). 0: none; make demo sets 60.
    detector_warmup_s: float = _env("FRAUD_DETECTOR_WARMUP_S", 0.0)
    # Records a detector query reads per micro-batch at most (Spark's maxOffsetsPerTrigger). Behind
    # (after a restart), larger batches cost less per record; a smaller bound commits sooner but cuts the
    # partitions at different event times (docs/deployment.md). --max-offsets-per-trigger overrides it.
    detector_max_offsets_per_trigger: int = _env("FRAUD_DETECTOR_MAX_OFFSETS_PER_TRIGGER", 200_000)
    # The exactly-once writer pulls a micro-batch's output to the driver in pieces of about this many
    # bytes (spark_job.alert_writer.stream_rows): the driver's memory is bounded by it, not by the batch.
    writer_fetch_bytes: int = _env("FRAUD_WRITER_FETCH_BYTES", 64 * 1024 * 1024)
    # How long the exactly-once writer's producer may try to deliver a record (kafka-python's
    # delivery_timeout_ms, whose default this is); its request timeout is derived from it. Shorter only
    # in the cluster test that makes records undeliverable (tests/cluster/undelivered.py).
    writer_delivery_timeout_ms: int = _env("FRAUD_WRITER_DELIVERY_TIMEOUT_MS", 120000)
    # The writer's transaction timeout: the broker aborts a transaction open longer. The least; a batch
    # whose staged bytes and rows need more gets more (spark_job.alert_writer.transaction_timeout_for),
    # up to the broker's transaction.max.timeout.ms (Kafka's default, 15 minutes).
    writer_transaction_timeout_ms: int = _env("FRAUD_WRITER_TRANSACTION_TIMEOUT_MS", 60000)
    writer_transaction_max_timeout_ms: int = _env("FRAUD_WRITER_TRANSACTION_MAX_TIMEOUT_MS", 900000)

    # How far a transaction's event time may lead its record's broker timestamp; beyond it the record is
    # dead-lettered (common.contracts, whose EVENT_TIME_MAX_AHEAD this is). No more than the shortest
    # watermark delay (2 minutes), or one record from a fast clock makes real traffic late (the job warns).
    event_time_max_ahead_s: float = _env("FRAUD_EVENT_TIME_MAX_AHEAD_S", 60.0)

    # Key of the HMAC that stands in a dead letter for the hash of an original holding a card number
    # (docs/architecture.md, "Bad input"); empty: a random key per run of the job.
    dlq_hash_key: str = _env("FRAUD_DLQ_HASH_KEY", "")

    # --- Spark ---------------------------------------------------------------------------------
    spark_master: str = _env("FRAUD_SPARK_MASTER", "local[2]")
    # local: the tuning of LOCAL_PROFILE below is in force; cluster: Spark's own defaults. Empty: local for a
    # local[...] master, cluster for any other (spark://, yarn, k8s://). `make settings` shows the one in force.
    profile: str = _env("FRAUD_PROFILE", "")
    # The driver's address: loopback for the local stack; a reachable address on a real cluster.
    spark_driver_host: str = _env("FRAUD_SPARK_DRIVER_HOST", "127.0.0.1")
    spark_driver_memory: str = _env("FRAUD_SPARK_DRIVER_MEMORY", "2g")
    # More options for every Spark JVM (driver and executors), e.g. JIT flags (docs/performance.md).
    spark_jvm_options: str = _env("FRAUD_SPARK_JVM_OPTIONS", "")
    # 0 = a task per core; one per partition (12) cost each live batch ~0.2 s of start-up (docs/performance.md)
    spark_source_tasks: int = _env("FRAUD_SPARK_SOURCE_TASKS", 0)
    # Diagnostics: when set, the detector job writes Spark's analyzer/optimizer time per rule here every
    # 10 s (RuleExecutor.dumpTimeSpent), to see what each micro-batch's planning costs.
    spark_rule_times_file: str = _env("FRAUD_SPARK_RULE_TIMES_FILE", "")
    spark_gc: str = _env("FRAUD_SPARK_GC", "G1")      # the driver's collector: -XX:+Use<this>GC
    # The settings below have Spark's (or Kafka's) own defaults here, for a cluster; the local profile
    # replaces them with LOCAL_PROFILE's values. A variable set by hand wins in either profile.
    # Shuffle partitions of stateful queries, frozen into each checkpoint at its first run; 0: the cores
    # Spark has (spark.default.parallelism) when the session starts.
    spark_shuffle_partitions: int = _env("FRAUD_SPARK_SHUFFLE_PARTITIONS", 0)
    spark_kafka_fetch_max_wait_ms: int = _env("FRAUD_SPARK_KAFKA_FETCH_MAX_WAIT_MS", 500)
    spark_codegen_factory_mode: str = _env("FRAUD_SPARK_CODEGEN_FACTORY_MODE", "FALLBACK")
    # 0: no switch of the code-generation mode by batch size (spark_job/tuning/codegen.py)
    spark_codegen_large_batch_rows: int = _env("FRAUD_SPARK_CODEGEN_LARGE_BATCH_ROWS", 0)
    spark_codegen_cache_entries: int = _env("FRAUD_SPARK_CODEGEN_CACHE_ENTRIES", 100)
    # The module Spark starts Python workers from, on any master: PySpark's daemon with Python 3.11's
    # zip-importer reset made lazy and the detectors' imports done before it forks. Empty: PySpark's own.
    spark_python_daemon: str = _env("FRAUD_SPARK_PYTHON_DAEMON", "common.pyspark_daemon")
    spark_jars_dir: Path = _env("FRAUD_SPARK_JARS_DIR", REPO_ROOT / ".cache" / "jars" / "spark-kafka")
    # The detector job's own jar (spark_job/jvm: the validation; detectors/operators/java: the keyed
    # operators), built by `deploy fetch`.
    spark_job_jar: Path = _env("FRAUD_SPARK_JOB_JAR", REPO_ROOT / ".cache" / "jars" / "spark-job" / "fraud-spark-job.jar")

    # --- Metrics (docs/metrics.md): each process serves /metrics in the Prometheus text format -------
    metrics_enabled: bool = _env("FRAUD_METRICS_ENABLED", True)      # false: no endpoint, no per-batch cost
    metrics_host: str = _env("FRAUD_METRICS_HOST", "127.0.0.1")
    detectors_metrics_port: int = _env("FRAUD_DETECTORS_METRICS_PORT", 9181)
    enricher_metrics_port: int = _env("FRAUD_ENRICHER_METRICS_PORT", 9182)
    cases_metrics_port: int = _env("FRAUD_CASES_METRICS_PORT", 9183)
    # The local Prometheus `make up` starts when Debian's prometheus package is installed or installable
    prometheus_port: int = _env("FRAUD_PROMETHEUS_PORT", 9190)

    # --- Local state (all git-ignored) ---------------------------------------------------------
    run_dir: Path = _env("FRAUD_RUN_DIR", REPO_ROOT / ".run")
    cache_dir: Path = _env("FRAUD_CACHE_DIR", REPO_ROOT / ".cache")
    # A local folder or a Hadoop file system URI (hdfs://..., s3a://...), kept as text: a Path would fold
    # "s3a://bucket" into "s3a:/bucket". Join names onto it with checkpoint_location().
    checkpoint_root: str = _env("FRAUD_CHECKPOINT_ROOT", str(REPO_ROOT / ".run" / "checkpoints"))
    # Who leads a checkpoint root (spark_job.leadership): "auto", a file lock on a local folder and a Kafka
    # consumer group elsewhere (hdfs://, s3a://); "kafka", the group always (a folder shared between hosts).
    leader_lease: str = _env("FRAUD_LEADER_LEASE", "auto")
    model_registry: Path = _env("FRAUD_MODEL_REGISTRY", REPO_ROOT / "models" / "registry")

    # --- Embedded local stack ------------------------------------------------------------------
    local_kafka_controller_port: int = _env("FRAUD_LOCAL_KAFKA_CONTROLLER_PORT", 19093)
    local_kafka_heap: str = _env("FRAUD_LOCAL_KAFKA_HEAP", "768m")
    kafka_version: str = _env("FRAUD_KAFKA_VERSION", "4.1.1")

    # --- The local cluster (make cluster-up, deploy/cluster.py, docs/cluster.md) -----------------
    # Three KRaft nodes (broker and controller each) and a Spark standalone master with two workers,
    # all on 127.0.0.1, below the kernel's ephemeral port range (see deploy.local_stack.free_ports).
    cluster_dir: Path = _env("FRAUD_CLUSTER_DIR", REPO_ROOT / ".run" / "cluster")
    cluster_kafka_ports: str = _env("FRAUD_CLUSTER_KAFKA_PORTS", "29292,29293,29294")       # client, one per node
    cluster_kafka_controller_ports: str = _env("FRAUD_CLUSTER_KAFKA_CONTROLLER_PORTS", "29295,29296,29297")
    cluster_kafka_heap: str = _env("FRAUD_CLUSTER_KAFKA_HEAP", "512m")
    cluster_spark_master_port: int = _env("FRAUD_CLUSTER_SPARK_MASTER_PORT", 27077)
    cluster_spark_master_ui_port: int = _env("FRAUD_CLUSTER_SPARK_MASTER_UI_PORT", 28080)  # its /json/: workers
    cluster_spark_worker_ports: str = _env("FRAUD_CLUSTER_SPARK_WORKER_PORTS", "27078,27079")   # one per worker
    cluster_spark_worker_ui_ports: str = _env("FRAUD_CLUSTER_SPARK_WORKER_UI_PORTS", "28081,28082")
    cluster_spark_worker_cores: int = _env("FRAUD_CLUSTER_SPARK_WORKER_CORES", 1)
    cluster_spark_worker_memory: str = _env("FRAUD_CLUSTER_SPARK_WORKER_MEMORY", "1g")     # what executors may take
    cluster_spark_executor_memory: str = _env("FRAUD_CLUSTER_SPARK_EXECUTOR_MEMORY", "768m")

    @classmethod
    def from_env(cls, overrides: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None) -> "Settings":
        """Defaults (the profile's), then environment variables, then explicit ``overrides`` (by field name)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(f.metadata["env"])
            if raw is not None:
                values[f.name] = _coerce(f.name, type(f.default), raw)
        values.update(overrides or {})
        chosen = cls(**values)
        if chosen.active_profile == "local":
            chosen = dataclasses.replace(chosen, **{k: v for k, v in LOCAL_PROFILE.items() if k not in values})
        return chosen

    @property
    def event_time_max_ahead(self) -> "timedelta":
        """``event_time_max_ahead_s`` as the contract takes it."""
        from datetime import timedelta

        return timedelta(seconds=self.event_time_max_ahead_s)

    @property
    def active_profile(self) -> str:
        """``local`` or ``cluster``: ``profile`` when set, else from the master."""
        if self.profile:
            if self.profile not in PROFILES:
                raise SettingsError(f"setting profile: expected one of {', '.join(PROFILES)}, got {self.profile!r}")
            return self.profile
        return "local" if self.spark_master.startswith("local") else "cluster"

    def replace(self, **changes: Any) -> "Settings":
        """A copy with ``changes``; one that moves it to the other profile (a cluster's master) takes that
        profile's values too, except where a value was set by hand."""
        changed = dataclasses.replace(self, **changes)
        if changed.active_profile == self.active_profile:
            return changed
        return dataclasses.replace(changed, **{
            f.name: changed._profile_value(f) for f in dataclasses.fields(self)
            if f.name in LOCAL_PROFILE and f.name not in changes and getattr(self, f.name) == self._profile_value(f)})

    @property
    def kafka_host(self) -> str:
        return self.kafka_bootstrap.split(",")[0].rsplit(":", 1)[0]

    @property
    def kafka_port(self) -> int:
        return int(self.kafka_bootstrap.split(",")[0].rsplit(":", 1)[1])

    def to_env(self) -> dict[str, str]:
        """These settings as environment variables, to hand them to a child process. A setting that has
        its profile's value is left out, so a child given another master gets that master's profile."""
        return {f.metadata["env"]: _render(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in LOCAL_PROFILE or getattr(self, f.name) != self._profile_value(f)}

    def _profile_value(self, f: dataclasses.Field) -> Any:
        return LOCAL_PROFILE[f.name] if self.active_profile == "local" else f.default

    def describe(self) -> list[tuple[str, str, str]]:
        """(environment variable, value, field) rows, secrets masked: for ``--help`` and docs."""
        rows = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if ("password" in f.name or f.name.endswith("_key")) and value:
                value = "***"
            elif isinstance(value, str) and "://" in value and "@" in value:  # a URL with credentials
                value = value.split("://", 1)[0] + "://***@" + value.rsplit("@", 1)[1]
            rows.append((f.metadata["env"], str(value), f.name))
        return rows


PROFILES = ("local", "cluster")

# The local profile: tuning for the 2-core development machine, where every process of the diamond shares
# the cores with the detector job. What each buys, measured with and without: docs/performance.md,
# "Workarounds for two cores". None of it follows the job to a cluster master.
LOCAL_PROFILE: dict[str, Any] = {
    # each shuffle partition costs every stateful operator a state store per batch
    "spark_shuffle_partitions": 1,
    # Kafka's 500 ms fetch wait is paid per partition at the log's end in every live batch
    "spark_kafka_fetch_max_wait_ms": 10,
    # small batches interpreted (no watermark code compiled each batch), large ones compiled (tuning/codegen.py)
    "spark_codegen_factory_mode": "NO_CODEGEN",
    "spark_codegen_large_batch_rows": 20_000,
    # a compiled batch of the rules query needs ~100 classes: Spark's 100 evicts them
    "spark_codegen_cache_entries": 500,
}


def checkpoint_location(root: str | Path, name: str) -> str:
    """``name`` under a checkpoint root that is a local folder or a file system URI (``s3a://b/ckpt``)."""
    root = str(root)
    return f"{root.rstrip('/')}/{name}" if "://" in root else str(Path(root) / name)


def local_folder(location: str | Path) -> Path | None:
    """The local folder a checkpoint location names (a path or a ``file:`` URI); None for another file
    system (``hdfs://``, ``s3a://``)."""
    text = str(location)
    if text.startswith("file:"):
        from urllib.parse import urlparse
        from urllib.request import url2pathname
        return Path(url2pathname(urlparse(text).path))      # Path would fold a file URI's "//"
    return None if "://" in text else Path(text)


class SettingsError(ValueError):
    """An environment variable holds a value its setting cannot take."""


def _render(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _coerce(name: str, kind: type, raw: str) -> Any:
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise SettingsError(f"setting {name}: expected true/false, got {raw!r}")
    if kind is int:
        try:
            return int(raw)
        except ValueError:
            raise SettingsError(f"setting {name}: expected an integer, got {raw!r}") from None
    if kind is float:
        try:
            return float(raw)
        except ValueError:
            raise SettingsError(f"setting {name}: expected a number, got {raw!r}") from None
    if issubclass(kind, Path):
        return Path(raw).expanduser()
    return raw


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
