"""Parsing and validation of raw Kafka records into the transaction schema, natively in Spark.

This is the Spark twin of ``common.contracts.decode_transaction`` (the specification): the same rules
in the same order, giving the same reason up to its first colon; ``tests/integration/test_dlq.py`` holds
the two to agreement with generated records. It runs on the JVM (JSON is parsed with
``try_parse_json`` into a VARIANT whose ``schema_of_variant`` tells the JSON type of each field), so
validation costs no Python round trip per record.

Known difference: Spark's JSON parser stops after the first complete value; wrapping the text in
``[...]`` and requiring exactly one element catches trailing data (``{..}{..}``, ``{..}}``, ``{..} x``)
except text that closes the wrapper itself (``{..}]}``), which no producer writes by accident.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from common import card_numbers as CN
from common import contracts as C
from detectors.base import TRANSACTION_SCHEMA

# The Kafka source's columns that the dead-letter record keeps.
RAW_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")
_STRING_FIELDS = C.ID_FIELDS + ("currency", "event_time", "channel", "mcc")


def _jtype(name: str) -> Column:
    """The JSON type of field ``name`` (computed once per record in ``with_validation``): OBJECT<..>,
    ARRAY<..>, STRING, BIGINT, DECIMAL(p,s), DOUBLE, BOOLEAN, VOID (JSON null), or SQL NULL when the
    field is missing."""
    return F.col(f"_t_{name}")


def _text(name: str) -> Column:
    return F.col(f"_s_{name}")


def _whole(pattern) -> str:
    """A contract pattern (matched whole in Python) for ``rlike``, which searches: \\A and \\z, not ^ and $
    (Java's $ also matches before a final line terminator)."""
    return rf"\A(?:{pattern.pattern})\z"


def holds_card_number(text: Column) -> Column:
    """``common.card_numbers.holds_card_number`` natively: a candidate whose digits pass Luhn."""
    return F.exists(card_number_candidates(text), is_card_candidate)


def card_number_candidates(text: Column) -> Column:
    """Every match of ``CANDIDATE_PATTERN`` in ``text`` (the same pattern in Java)."""
    return F.regexp_extract_all(text, F.lit(CN.CANDIDATE_PATTERN), F.lit(0))


def candidate_digits(candidate: Column) -> Column:
    return F.regexp_replace(candidate, CN.SEPARATORS_PATTERN, "")


def is_card_candidate(candidate: Column) -> Column:
    digits = candidate_digits(candidate)
    return F.length(digits).between(CN.MIN_DIGITS, CN.MAX_DIGITS) & F.call_function("luhn_check", digits)


def _is_number(jtype: Column) -> Column:
    return jtype.isin("BIGINT", "DOUBLE") | jtype.startswith("DECIMAL")


def _json_type_name(jtype: Column) -> Column:
    """Spark's variant type names in the words of common.contracts._json_type."""
    return (F.when(jtype == "VOID", "null").when(jtype == "STRING", "string").when(jtype == "BOOLEAN", "boolean")
            .when(jtype.startswith("ARRAY"), "array").when(jtype.startswith("OBJECT"), "object")
            .otherwise("number"))


# The form every producer of this project writes (``json.dumps(..., separators=(",", ":"))`` of the contract's
# fields in the contract's order; the simulator writes the same bytes): an object with exactly these
# keys, each string printable ASCII without escapes, the amount a plain non-negative number with at most
# two decimals, lat/lon plain numbers or null (both or neither). For such a record the JSON structure and
# every field's JSON type are known from the regex alone, so ``from_json`` can read the values; every
# other record (another key order, whitespace, escapes, exponents, extra fields, any breakage) takes the
# general path. Measured in docs/performance.md.
_ASCII_STRING = r'"[\x20\x21\x23-\x5b\x5d-\x7e]*+"'
_AMOUNT = r"(?:0|[1-9][0-9]{0,8})(?:\.[0-9]{1,2})?"
_COORDINATE = r"(?:-?(?:0|[1-9][0-9]{0,2})(?:\.[0-9]{1,15})?|null)"
CANONICAL_RE = (r"\A\{" + ",".join(f'"{name}":' + (_AMOUNT if name == "amount" else _ASCII_STRING)
                                   for name in C.REQUIRED_FIELDS)
                + "(?:" + "".join(f',"{name}":{_COORDINATE}' for name in C.OPTIONAL_FIELDS) + ")?"
                + r"\}\z")
_CANONICAL_SCHEMA = ", ".join([*(f"{name} string" for name in _STRING_FIELDS), "amount double",
                               *(f"{name} double" for name in C.OPTIONAL_FIELDS)])


def _extract(raw: DataFrame) -> DataFrame:
    """Parse each record ONCE and pull out every field's JSON type and value as plain columns.

    Stage by stage on purpose: the rules below then compare plain columns. Written as one expression,
    the JSON was re-read for every rule and whole-stage codegen gave up (~800 records/s).

    Two paths give the same columns: a record in the canonical form (``CANONICAL_RE``) is read by
    ``from_json`` (its types are known); any other is parsed into a VARIANT (``try_parse_json``) whose
    ``schema_of_variant`` gives each field's JSON type. Each expensive step is under a ``when`` on the
    path, so a record pays for one path only.
    """
    text = "CAST(value AS STRING)"
    canonical = F.col("_canonical")
    # Column.rlike, not SQL text: a SQL string literal would eat the pattern's backslashes.
    df = raw.withColumn("_canonical", F.coalesce(F.col("value").cast("string").rlike(CANONICAL_RE), F.lit(False)))
    df = df.withColumn("_valid_utf8", canonical | F.expr(f"is_valid_utf8({text})"))
    df = df.select("*", F.when(~canonical & F.col("_valid_utf8"), F.expr(f"try_parse_json(concat('[', {text}, ']'))"))
                   .alias("_wrapped"),
                   F.when(canonical, F.expr(f"from_json({text}, '{_CANONICAL_SCHEMA}')")).alias("_fast"))
    df = df.select("*", (canonical | F.col("_wrapped").isNotNull()).alias("_json_ok"),
                   F.when(canonical, F.lit(1))
                   .otherwise(F.expr("array_size(try_variant_get(_wrapped, '$', 'array<variant>'))")).alias("_values"),
                   F.expr("variant_get(_wrapped, '$[0]')").alias("_v"))
    fast = F.col("_fast")

    def either(name: str, on_fast: Column, general: str | Column) -> Column:
        general = F.expr(general) if isinstance(general, str) else general
        return F.when(canonical, on_fast).otherwise(general).alias(name)

    def fast_number_type(name: str) -> Column:
        return F.when(fast[name].isNull(), F.lit("VOID")).otherwise(F.lit("DOUBLE"))

    fields = C.REQUIRED_FIELDS + C.OPTIONAL_FIELDS
    fast_types = {**{name: F.lit("STRING") for name in _STRING_FIELDS}, "amount": F.lit("DOUBLE"),
                  **{name: fast_number_type(name) for name in C.OPTIONAL_FIELDS}}
    # A valid, single JSON value is an object exactly when its text starts with "{" after JSON whitespace:
    # the root's type name (schema_of_variant walks the whole value) is only worked out for the others.
    is_object = F.expr(f"substring(trim(LEADING ' \t\n\r' FROM {text}), 1, 1) = '{{'")
    df = df.select(
        "*",
        either("_t_root", F.lit("OBJECT"), F.when(is_object, F.lit("OBJECT")).otherwise(F.expr("schema_of_variant(_v)"))),
        *[either(f"_t_{name}", fast_types[name], f"schema_of_variant(variant_get(_v, '$.{name}'))") for name in fields],
        *[either(f"_s_{name}", fast[name], f"try_variant_get(_v, '$.{name}', 'string')") for name in _STRING_FIELDS],
        either("_amount", fast["amount"], "try_variant_get(_v, '$.amount', 'double')"),
        # the canonical form has at most two decimals: nothing to check exactly
        either("_amount_exact", F.lit(None).cast("decimal(38,18)"),
               "try_variant_get(_v, '$.amount', 'decimal(38,18)')"),
        *[either(f"_{name}", fast[name], f"try_variant_get(_v, '$.{name}', 'double')") for name in C.OPTIONAL_FIELDS],
    )
    return df.withColumn("_event_time", F.try_to_timestamp(_text("event_time"), F.lit(C.EVENT_TIME_PATTERN)))


def with_validation(raw: DataFrame) -> DataFrame:
    """Add ``_reason`` (null for a valid record) and the typed transaction columns to raw Kafka rows.

    ``raw`` has the Kafka source's columns: key, value (binary), topic, partition, offset, timestamp.
    """
    df = _extract(raw)
    root_type = F.col("_t_root")
    checks: list[tuple[Column, Column]] = [
        (F.col("value").isNull() | (F.length("value") == 0), F.lit("empty value")),
        (F.length("value") > C.MAX_VALUE_BYTES,
         F.format_string(f"value is oversized: %d bytes > {C.MAX_VALUE_BYTES}", F.length("value"))),
        (~F.col("_valid_utf8"), F.lit("value is not valid UTF-8")),
        (~F.col("_json_ok"), F.lit("value is not valid JSON")),
        # exactly one top-level value inside the wrapper, else there was trailing data
        (F.col("_values") != 1, F.lit("value is not valid JSON")),
        (~F.col("_canonical") & F.col("value").cast("string").rlike(C.LONE_SURROGATE_RE.pattern),
         F.lit("value is not valid JSON")),
        (~root_type.startswith("OBJECT"),
         F.concat(F.lit("value is a JSON "), _json_type_name(root_type), F.lit(", not an object"))),
    ]
    for name in C.REQUIRED_FIELDS:
        checks.append((_jtype(name).isNull(), F.lit(f"missing required field {name}")))
        checks.append((_jtype(name) == "VOID", F.lit(f"required field {name} is null")))
    for name in _STRING_FIELDS:
        checks.append((_jtype(name) != "STRING",
                       F.concat(F.lit(f"{name} must be a string, got "), _json_type_name(_jtype(name)))))
    for name in C.ID_FIELDS:
        checks.append((F.length(F.trim(_text(name))) == 0, F.lit(f"{name} is empty")))
        checks.append((F.length(_text(name)) > C.MAX_ID_LENGTH,
                       F.lit(f"{name} is longer than {C.MAX_ID_LENGTH} characters")))
    for name in C.ID_FIELDS:
        checks.append((holds_card_number(_text(name)), F.lit(f"{name} holds a card number (PAN); ids must be tokens")))
    card = _text("card_id")

    amount, amount_exact = F.col("_amount"), F.col("_amount_exact")
    checks += [
        (~_is_number(_jtype("amount")), F.concat(F.lit("amount must be a number, got "),
                                                _json_type_name(_jtype("amount")))),
        (amount < 0, F.lit("amount is negative")),
        (amount.isNull() | (amount > C.MAX_AMOUNT) | F.isnan(amount), F.lit("amount is absurdly large")),
        (amount_exact != F.round(amount_exact, 2), F.lit("amount has more than 2 decimals")),
        (~_text("currency").rlike(_whole(C.CURRENCY_RE)), F.lit("currency is not an ISO 4217 code")),
        (~_text("channel").isin(*C.CHANNELS), F.lit(f"channel must be one of {', '.join(C.CHANNELS)}")),
        (~_text("mcc").rlike(_whole(C.MCC_RE)), F.lit("mcc is not a 4-digit merchant category code")),
    ]
    event_time = F.col("_event_time")
    checks += [
        (~_text("event_time").rlike(_whole(C.EVENT_TIME_RE)), F.lit("event_time is not ISO-8601 UTC with milliseconds")),
        (event_time.isNull(), F.lit("event_time is not a real date")),
        (event_time < F.lit(C.MIN_EVENT_TIME.strftime("%Y-%m-%d %H:%M:%S")).cast("timestamp"),
         F.lit("event_time is absurdly far in the past")),
        (event_time > F.col("timestamp") + F.expr(f"INTERVAL {C.MAX_FUTURE_SKEW.days} DAYS"),
         F.lit(f"event_time is more than {C.MAX_FUTURE_SKEW.days} day ahead of the record")),
    ]
    for name, bound in (("lat", 90), ("lon", 180)):
        jtype = _jtype(name)
        present = jtype.isNotNull() & (jtype != "VOID")
        checks.append((present & ~_is_number(jtype),
                       F.concat(F.lit(f"{name} must be a number or null, got "), _json_type_name(jtype))))
        coordinate = F.col(f"_{name}")
        checks.append((present & ((coordinate < -bound) | (coordinate > bound)), F.lit(f"{name} is out of range")))
    checks += [
        (F.col("key").isNull(), F.lit("record key is missing (it must be the card_id)")),
        (F.col("key").cast("string") != card, F.lit("record key does not match card_id")),
    ]

    # One CASE with a branch per rule (first match wins), not sixty nested ones: a deep tree of
    # CaseWhen made the optimizer's constraint propagation fill the driver's heap.
    first, *rest = checks
    reason = F.when(F.coalesce(first[0], F.lit(False)), first[1])
    for condition, message in rest:
        reason = reason.when(F.coalesce(condition, F.lit(False)), message)

    typed = {
        **{name: _text(name) for name in _STRING_FIELDS if name != "event_time"},
        "amount": F.round(amount, 2),
        "event_time": event_time,
        "lat": F.col("_lat"),
        "lon": F.col("_lon"),
        "ingested_at": F.col("timestamp"),
    }
    return df.select("*", reason.alias("_reason"),
                     *[typed[name].alias(name) for name in TRANSACTION_SCHEMA.fieldNames()])


def _rows_where(validated: DataFrame, keep: Column, columns: list[Column]) -> DataFrame:
    """The rows where ``keep`` holds, as ``columns``, written as an explode instead of a filter.

    A filter on ``_reason`` would be pushed down through the validation's projections and have every
    rule, and the JSON parse under it, inlined and evaluated again (~100x slower). An explode of a
    one-element array is not rewritten that way, so each record is parsed and checked exactly once.
    """
    picked = F.explode(F.when(keep, F.array(F.struct(*columns))).otherwise(F.array())).alias("_row")
    return validated.select(picked).select("_row.*")


def valid_transactions(validated: DataFrame) -> DataFrame:
    """The rows that passed, in ``TRANSACTION_SCHEMA``."""
    return _rows_where(validated, F.col("_reason").isNull(),
                       [F.col(name) for name in TRANSACTION_SCHEMA.fieldNames()])


def invalid_records(validated: DataFrame) -> DataFrame:
    """The rows that failed, with what the dead-letter record needs."""
    return _rows_where(validated, F.col("_reason").isNotNull(),
                       [F.col("_reason").alias("reason"), *map(F.col, RAW_COLUMNS)])
