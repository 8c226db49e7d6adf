"""Dead-letter records for ``transactions.dlq``: the reason, a safe copy of the original and where it came from.

Built natively in Spark (no Python per record) from the rows ``spark_job.parsing.invalid_records`` sets
aside. What a dead letter keeps of the original key and of its value, each:

- a copy, base64-encoded (any bytes survive JSON), of at most ``MAX_DLQ_KEY_BYTES`` /
  ``MAX_DLQ_ORIGINAL_BYTES``, with the original's size and whether it was cut: however large the
  record, its dead letter fits the producer's request limit, so one record cannot stop the query;
- card numbers in the copy masked (``common.card_numbers.masked_copy``, run by its Java twin: the text
  read through JSON escapes, UTF-16 and other scripts' digits as the validator reads it, masked before
  the cut; length, first six and last four digits kept), so a rejected card number is never written
  again, in clear or in base64;
- a hash of the whole original: SHA-256 when it holds no card number; when it holds one, an
  HMAC-SHA256 keyed with ``FRAUD_DLQ_HASH_KEY`` instead, because a plain hash of a value whose copy
  shows all but six digits of the number is brute-forced in a moment.

The dead letter's Kafka key is the key's copy (capped, masked), so one card's bad records still share a
partition. ``source_topic``/``source_partition``/``source_offset`` point at the whole original while the
topic retains it.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from functools import lru_cache

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from common.contracts import MAX_VALUE_BYTES
from common.settings import Settings
from spark_job.parsing import MASKED_COPY_FUNCTION

log = logging.getLogger(__name__)

# Every record the contract could accept fits whole: only an oversized value is cut, and its tail stays
# in the source topic (source_partition/offset) while the topic keeps it.
MAX_DLQ_ORIGINAL_BYTES = MAX_VALUE_BYTES
MAX_DLQ_KEY_BYTES = 1024      # a key is a card_id of at most 128 characters; anything longer is not one
TIME_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"


def dlq_values(invalid: DataFrame, hash_key: bytes) -> DataFrame:
    """One JSON string per invalid record (column ``value``) keyed by the capped, masked original key."""
    # The masked copies in a projection of their own: each is read several times below, and the optimizer
    # does not inline a UDF where that would run it again.
    invalid = invalid.select(
        "*", F.call_function(MASKED_COPY_FUNCTION, "key", F.lit(MAX_DLQ_KEY_BYTES)).alias("_key_masked"),
        F.call_function(MASKED_COPY_FUNCTION, "value", F.lit(MAX_DLQ_ORIGINAL_BYTES)).alias("_value_masked"))
    key = _safe_copy(F.col("key"), F.col("_key_masked"), MAX_DLQ_KEY_BYTES, hash_key)
    value = _safe_copy(F.col("value"), F.col("_value_masked"), MAX_DLQ_ORIGINAL_BYTES, hash_key)
    record = F.struct(
        F.col("reason"),
        F.col("topic").alias("source_topic"),
        F.col("partition").alias("source_partition"),
        F.col("offset").alias("source_offset"),
        F.date_format("timestamp", TIME_FORMAT).alias("source_timestamp"),
        F.base64(key["copy"]).alias("key_base64"),
        key["size"].alias("key_size"),
        key["truncated"].alias("key_truncated"),
        key["sha256"].alias("key_sha256"),
        key["hmac"].alias("key_hmac_sha256"),
        F.base64(value["copy"]).alias("value_base64"),
        value["size"].alias("value_size"),
        value["truncated"].alias("value_truncated"),
        value["sha256"].alias("value_sha256"),
        value["hmac"].alias("value_hmac_sha256"),
        (key["masked"] | value["masked"]).alias("card_number_masked"),
        F.date_format(F.current_timestamp(), TIME_FORMAT).alias("dead_lettered_at"),
    )
    return invalid.select(key["copy"].cast("string").alias("key"), F.to_json(record).alias("value"))


def _safe_copy(original: Column, masked_copy: Column, limit: int, hash_key: bytes) -> dict[str, Column]:
    """The capped, masked copy of a binary column and what describes the whole original (``masked_copy``:
    ``fraud_masked_copy`` of it, null when it holds no card number)."""
    size = F.coalesce(F.length(original), F.lit(0))          # bytes, for a binary column
    truncated = size > limit
    capped = F.when(truncated, F.substring(original, 1, limit)).otherwise(original)
    masked = masked_copy.isNotNull()
    whole = F.coalesce(original, F.lit(b"").cast("binary"))
    return {
        "copy": F.coalesce(masked_copy, capped),
        "size": size,
        "truncated": truncated,
        "masked": masked,
        "sha256": F.when(~masked, F.sha2(whole, 256)),
        "hmac": F.when(masked, hmac_sha256(whole, hash_key)),
    }


def hmac_sha256(message: Column, key: bytes) -> Column:
    """HMAC-SHA256 (RFC 2104) of a binary column, hex, from two of Spark's SHA-256: Spark has no HMAC."""
    block = hashlib.sha256(key).digest() if len(key) > 64 else key
    block = block.ljust(64, b"\0")
    inner_pad, outer_pad = bytes(b ^ 0x36 for b in block), bytes(b ^ 0x5C for b in block)
    inner = F.unhex(F.sha2(F.concat(F.lit(inner_pad), message), 256))
    return F.sha2(F.concat(F.lit(outer_pad), inner), 256)


@lru_cache(maxsize=None)
def _random_key() -> bytes:
    log.warning("FRAUD_DLQ_HASH_KEY is not set: dead letters holding a card number are hashed with a key of "
                "this run only (their hashes cannot be compared with other runs')")
    return secrets.token_bytes(32)


def dlq_hash_key(settings: Settings) -> bytes:
    """The key of the dead letters' HMAC: ``FRAUD_DLQ_HASH_KEY``, or a random one for this process."""
    return settings.dlq_hash_key.encode() if settings.dlq_hash_key else _random_key()
