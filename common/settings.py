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

    # --- Topics (names and partition counts of design.md section 1) -------------------------------
    topic_transactions: str = _env("FRAUD_TOPIC_TRANSACTIONS", "transactions")
    topic_labels: str = _env("FRAUD_TOPIC_LABELS", "transactions.labels")
    topic_dlq: str = _env("FRAUD_TOPIC_DLQ", "transactions.dlq")
    topic_alerts: str = _env("FRAUD_TOPIC_ALERTS", "alerts")
    topic_alert_markers: str = _env("FRAUD_TOPIC_ALERT_MARKERS", "alerts.markers")
    topic_alerts_enriched: str = _env("FRAUD_TOPIC_ALERTS_ENRICHED", "alerts.enriched")
    topic_cases: str = _env("FRAUD_TOPIC_CASES", "cases")
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

    # --- Spark ---------------------------------------------------------------------------------
    spark_master: str = _env("FRAUD_SPARK_MASTER", "local[2]")
    # The driver's address: loopback for the local stack; a reachable address on a real cluster.
    spark_driver_host: str = _env("FRAUD_SPARK_DRIVER_HOST", "127.0.0.1")
    # One partition per stateful operator on the two local cores: the operators of a query (and the
    # queries) run side by side anyway, and each partition costs every operator a state store to load,
    # evict and commit per micro-batch. Measured side by side against 2 and 4 (README, Performance).
    # On a cluster: about 2-3x the executor cores (deploy/README.md).
    spark_shuffle_partitions: int = _env("FRAUD_SPARK_SHUFFLE_PARTITIONS", 1)
    spark_driver_memory: str = _env("FRAUD_SPARK_DRIVER_MEMORY", "2g")
    # The Spark JVMs' garbage collector (-XX:+Use<this>GC). HotSpot's default, G1, gave up about 15% of
    # two cores to its barriers and concurrent threads: side by side, 800,000 transactions through all
    # four detectors at 17,751 tx/s with Parallel vs 15,437 with G1, a live 2,000 tx/s micro-batch in
    # 926 vs 1,089-1,102 ms (README, Performance). Parallel stops the world for each collection: full
    # ones took up to 1.1 s with a 4 GB heap and a million rows of join state; for much larger heaps
    # with a latency target, measure G1.
    spark_gc: str = _env("FRAUD_SPARK_GC", "Parallel")
    # The Kafka source's consumers: how long a fetch at the end of a partition waits for more data.
    # Kafka's default of 500 ms was paid once per partition per scan of the topic in every micro-batch
    # that read up to the end of the log (every batch of a live stream): +3 s per scan of 12 partitions
    # on 2 cores, measured (README, Performance).
    spark_kafka_fetch_max_wait_ms: int = _env("FRAUD_SPARK_KAFKA_FETCH_MAX_WAIT_MS", 10)
    # How many tasks read a micro-batch from Kafka: 0 = one per core of the session (its default
    # parallelism), N = at most N. Spark's default, one task per topic partition (12 here), cost every
    # live micro-batch ~0.2 s of task start-up on 2 cores: p99 latency 2.57 / 2.26 s with 2 tasks vs
    # 2.84 / 2.67 s with 12 (README, Performance). Set it to the partition count for Spark's behaviour.
    spark_source_tasks: int = _env("FRAUD_SPARK_SOURCE_TASKS", 0)
    # How Spark builds the per-row functions outside whole-stage code (the stateful operators' key and
    # value projections and state-eviction predicates): FALLBACK (Spark's default) generates and compiles
    # Java for each, NO_CODEGEN interprets them and also turns whole-stage code generation off. A
    # compiled eviction predicate embeds the batch's watermark as a constant, so every micro-batch
    # generated and compiled those of every stateful operator again: a live 2,000 tx/s batch took
    # 1.27 / 1.37 s with FALLBACK vs 1.05 / 1.18 s with NO_CODEGEN. Large batches are the other way
    # round: their validation runs interpreted, 200,000-record batches of all four detectors went
    # 18,276 / 16,655 tx/s with FALLBACK vs 15,441 / 14,871 (README, Performance). So this is the mode of
    # small batches, and a query whose last batch read spark_codegen_large_batch_rows or more runs its
    # next ones with FALLBACK (spark_job.codegen.CodegenByBatchSize; 0: never). Spark documents the
    # switch as internal (its test suites run every expression both ways); FALLBACK restores Spark's
    # behaviour for every batch.
    spark_codegen_factory_mode: str = _env("FRAUD_SPARK_CODEGEN_FACTORY_MODE", "NO_CODEGEN")
    spark_codegen_large_batch_rows: int = _env("FRAUD_SPARK_CODEGEN_LARGE_BATCH_ROWS", 20_000)
    # How many generated classes Spark keeps compiled (spark.sql.codegen.cache.maxEntries, a static
    # conf). A compiled micro-batch of the shared query of the four built-in detectors needs ~100 (the
    # validation's projections, each join's and aggregation's key, value and row projections); with
    # Spark's default of 100 the least recently used were evicted before the next batch came round to
    # them, so every batch generated, compiled and JIT-compiled all of them again: 63-98 compilations
    # per 50,000-record batch vs 9 (those that embed the batch's watermark) with room for them, and
    # 800,000 transactions through all four detectors at 23,370 / 23,569 tx/s vs 19,797 / 20,729 side
    # by side (README, Performance). Old entries of the batch-specific classes age out of the cache.
    spark_codegen_cache_entries: int = _env("FRAUD_SPARK_CODEGEN_CACHE_ENTRIES", 500)
    # How many versions of each HDFS-backed state store's map stay in memory, each a whole map on the
    # heap. Spark's default, 2, also lets a failed batch run again from memory; with 1 it reloads its
    # state from the checkpoint (slower, same result), and the collector carries one copy less of every
    # state: 800,000 transactions through all four detectors at 18,907 / 19,079 tx/s vs 16,128 / 17,647
    # with 2 (README, Performance).
    spark_state_versions_in_memory: int = _env("FRAUD_SPARK_STATE_VERSIONS_IN_MEMORY", 1)
    # Hadoop's local file system writes a .crc file beside every file and renames both: every micro-batch
    # writes its offset and commit logs and a delta file per state store that way. Off (false), checkpoints
    # on local paths use the raw local file system; the state files keep LZ4's own block checksums, and
    # renames stay atomic. Live 2,000 tx/s batches of double_swipe + velocity: median 759 / 773 ms vs
    # 917 / 971 ms with the .crc files, p99 1.66 / 1.86 s vs 1.98 / 2.06 s (README, Performance). Only the
    # file: scheme; HDFS and S3 are untouched.
    spark_local_checksum_files: bool = _env("FRAUD_SPARK_LOCAL_CHECKSUM_FILES", False)
    spark_jars_dir: Path = _env("FRAUD_SPARK_JARS_DIR", REPO_ROOT / ".cache" / "jars" / "spark-kafka")

    # --- Local state (all git-ignored) ---------------------------------------------------------
    run_dir: Path = _env("FRAUD_RUN_DIR", REPO_ROOT / ".run")
    cache_dir: Path = _env("FRAUD_CACHE_DIR", REPO_ROOT / ".cache")
    # A local folder or a Hadoop file system URI (hdfs://..., s3a://...), kept as text: a Path would fold
    # "s3a://bucket" into "s3a:/bucket". Join names onto it with checkpoint_location().
    checkpoint_root: str = _env("FRAUD_CHECKPOINT_ROOT", str(REPO_ROOT / ".run" / "checkpoints"))
    model_registry: Path = _env("FRAUD_MODEL_REGISTRY", REPO_ROOT / "models" / "registry")

    # --- Embedded local stack ------------------------------------------------------------------
    local_kafka_controller_port: int = _env("FRAUD_LOCAL_KAFKA_CONTROLLER_PORT", 19093)
    local_kafka_heap: str = _env("FRAUD_LOCAL_KAFKA_HEAP", "768m")
    kafka_version: str = _env("FRAUD_KAFKA_VERSION", "4.1.1")

    @classmethod
    def from_env(cls, overrides: Mapping[str, Any] | None = None,
                 environ: Mapping[str, str] | None = None) -> "Settings":
        """Defaults, then environment variables, then explicit ``overrides`` (by field name)."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(f.metadata["env"])
            if raw is not None:
                values[f.name] = _coerce(f.name, type(f.default), raw)
        values.update(overrides or {})
        return cls(**values)

    def replace(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)

    @property
    def kafka_host(self) -> str:
        return self.kafka_bootstrap.split(",")[0].rsplit(":", 1)[0]

    @property
    def kafka_port(self) -> int:
        return int(self.kafka_bootstrap.split(",")[0].rsplit(":", 1)[1])

    def to_env(self) -> dict[str, str]:
        """These settings as environment variables, to hand them to a child process."""
        return {f.metadata["env"]: _render(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def describe(self) -> list[tuple[str, str, str]]:
        """(environment variable, value, field) rows, secrets masked: for ``--help`` and docs."""
        rows = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if "password" in f.name and value:
                value = "***"
            elif isinstance(value, str) and "://" in value and "@" in value:  # a URL with credentials
                value = value.split("://", 1)[0] + "://***@" + value.rsplit("@", 1)[1]
            rows.append((f.metadata["env"], str(value), f.name))
        return rows


def checkpoint_location(root: str | Path, name: str) -> str:
    """``name`` under a checkpoint root that is a local folder or a file system URI (``s3a://b/ckpt``)."""
    root = str(root)
    return f"{root.rstrip('/')}/{name}" if "://" in root else str(Path(root) / name)


def _render(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _coerce(name: str, kind: type, raw: str) -> Any:
    if kind is bool:
        lowered = raw.strip().lower()
        if lowered in {"1", "true", "yes", "on"}:
            return True
        if lowered in {"0", "false", "no", "off"}:
            return False
        raise ValueError(f"setting {name}: expected true/false, got {raw!r}")
    if kind is int:
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"setting {name}: expected an integer, got {raw!r}") from None
    if kind is float:
        return float(raw)
    if issubclass(kind, Path):
        return Path(raw).expanduser()
    return raw


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
