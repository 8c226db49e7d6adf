"""Dead-letter records for ``transactions.dlq``: the reason, the original bytes and where they came from.

Built natively in Spark from the rows ``spark_job.parsing.invalid_records`` sets aside. The original
key and value are base64-encoded, so any bytes survive JSON; values larger than ``MAX_DLQ_ORIGINAL_BYTES``
keep their first bytes, their size and their SHA-256 (the source topic/partition/offset still points at
the whole record while the topic retains it), so one huge record cannot make the DLQ write fail.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

MAX_DLQ_ORIGINAL_BYTES = 256 * 1024


def dlq_values(invalid: DataFrame) -> DataFrame:
    """One JSON string per invalid record (column ``value``) keyed by the original key (``key``)."""
    size = F.coalesce(F.length("value"), F.lit(0))
    kept = F.when(size > MAX_DLQ_ORIGINAL_BYTES, F.substring("value", 1, MAX_DLQ_ORIGINAL_BYTES)).otherwise(F.col("value"))
    record = F.struct(
        F.col("reason"),
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.date_format("timestamp", "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("source_timestamp"),
        F.base64("key").alias("key_base64"),
        F.base64(kept).alias("value_base64"),
        size.alias("value_size"),
        (size > MAX_DLQ_ORIGINAL_BYTES).alias("value_truncated"),
        F.sha2(F.coalesce(F.col("value"), F.lit(b"").cast("binary")), 256).alias("value_sha256"),
        F.date_format(F.current_timestamp(), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").alias("dead_lettered_at"),
    )
    return invalid.select(F.col("key").cast("string").alias("key"), F.to_json(record).alias("value"))
