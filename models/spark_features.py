"""The Spark side of ``models.features``: the same functions, run in Spark on a static DataFrame or a stream.

``features_frame(transactions, terminal_table)`` turns parsed transactions (``TRANSACTION_SCHEMA``) into
the identifying columns plus ``FEATURES``:

1. group by ``customer_id`` and run ``features.row_features`` + ``features.customer_window_stats`` in
   pandas: ``applyInPandas`` on a static DataFrame (the whole history at once, like training), or
   ``applyInPandasWithState`` on a stream (state per customer: the last 30 days + one day of margin of
   (event time, amount), as little-endian int64/float64 bytes, evicted by an event-time timeout 31 days
   after the customer's last transaction; rows behind the watermark are dropped by the operator);
2. left join the terminal table (a static DataFrame built from the pandas table the caller hands over,
   broadcast) on ``(terminal_id, day)``;
3. ``mapInPandas``: ``features.terminal_features`` on the joined rows (whole-day counts plus day D-7's
   labelled transactions up to ``t - 7 days``; a transaction without a row gets 0), as the batch path
   does after its merge.

Streaming caveat (the only way the paths can differ): a transaction is scored with the history that
has arrived so far. A late transaction (within the watermark) sees all earlier ones, exactly as in
batch, but transactions scored before it arrived do not see it. In-order streams give identical
features; the parity test checks it.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from common import pyspark_compat
from common.state_timeouts import timeout_after
from models import features as fx

# PySpark 4.0.0 worker bug in applyInPandasWithState (see common/pyspark_compat.py): installed at import so
# that every Python worker unpickling ``_streaming_function`` (this module) has it before the first batch.
pyspark_compat.install()

# Columns carried through the per-customer step (everything the alert needs, including its trigger
# context, plus the features; ``amount`` is a feature).
CARRIED = ["txn_id", "card_id", "customer_id", "merchant_id", "terminal_id", "currency", "channel",
           "lat", "lon", "event_time"]
CUSTOMER_STEP_SCHEMA = ("txn_id string, card_id string, customer_id string, merchant_id string, "
                        "terminal_id string, currency string, channel string, lat double, lon double, "
                        "event_time timestamp, day long, "
                        + ", ".join(f"{name} double" for name in fx.ROW_FEATURES + fx.CUSTOMER_FEATURES))
STATE_SCHEMA = "t_ms binary, amounts binary, last_ms long"
HISTORY_MARGIN_MS = fx.DAY_MS    # kept beyond the longest window, for rows arriving late


def _customer_step(pdf: pd.DataFrame, hist_t: np.ndarray, hist_a: np.ndarray) -> pd.DataFrame:
    """Row and customer features of one customer's new rows, given its history (empty on static)."""
    pdf = pdf.sort_values(["event_time", "txn_id"], kind="mergesort").reset_index(drop=True)
    t_ms = fx.to_ms(pdf["event_time"])
    amount = pdf["amount"].to_numpy(dtype=np.float64)
    rows = fx.row_features(t_ms, amount)
    cust = fx.customer_features_with_history(hist_t, hist_a, t_ms, amount, pdf["txn_id"].to_numpy())
    return pd.concat([pdf[CARRIED], rows, cust], axis=1)


def _static_function(pdf: pd.DataFrame) -> pd.DataFrame:
    return _customer_step(pdf, np.zeros(0, dtype=np.int64), np.zeros(0))


def _streaming_function(key: tuple, frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
    pyspark_compat.install()              # no-op once installed
    if state.hasTimedOut:          # no transaction for 31 days of event time: the history is useless
        state.remove()
        return
    pdf = pd.concat(list(frames), ignore_index=True)
    if state.exists:
        t_bytes, a_bytes, last_ms = state.get
        hist_t, hist_a = np.frombuffer(t_bytes, dtype="<i8"), np.frombuffer(a_bytes, dtype="<f8")
    else:
        hist_t, hist_a, last_ms = np.zeros(0, dtype=np.int64), np.zeros(0), 0
    out = _customer_step(pdf, hist_t, hist_a)
    all_t = np.concatenate([hist_t, fx.to_ms(pdf["event_time"])])
    all_a = np.concatenate([hist_a, pdf["amount"].to_numpy(dtype=np.float64)])
    last_ms = max(int(last_ms), int(all_t.max()))
    keep = all_t > last_ms - fx.CUSTOMER_HISTORY_MS - HISTORY_MARGIN_MS
    order = np.argsort(all_t[keep], kind="stable")
    state.update((all_t[keep][order].astype("<i8").tobytes(), all_a[keep][order].astype("<f8").tobytes(),
                  last_ms))
    state.setTimeoutTimestamp(timeout_after(state, last_ms + fx.CUSTOMER_HISTORY_MS + HISTORY_MARGIN_MS))
    yield out


def customer_step(transactions: DataFrame) -> DataFrame:
    """Row + customer features, per customer in pandas (static: applyInPandas; stream: with state)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    columns = transactions.select(*CARRIED, "amount")
    grouped = columns.groupBy("customer_id")
    if transactions.isStreaming:
        return grouped.applyInPandasWithState(_streaming_function, CUSTOMER_STEP_SCHEMA, STATE_SCHEMA,
                                              "append", GroupStateTimeout.EventTimeTimeout)
    return grouped.applyInPandas(_static_function, CUSTOMER_STEP_SCHEMA)


TERMINAL_TABLE_SCHEMA = ("terminal_id string, day long, "
                         + ", ".join(f"{n} double" for n in fx.TERMINAL_DAY_COUNTS)
                         + ", recent_ms array<long>, recent_fraud array<double>")
FEATURES_SCHEMA = (CUSTOMER_STEP_SCHEMA + ", "
                   + ", ".join(f"{name} double" for name in fx.TERMINAL_FEATURES))


def terminal_frame(spark, table: pd.DataFrame | None) -> DataFrame:
    """The terminal feature table (``features.TERMINAL_TABLE_COLUMNS``) as a static DataFrame."""
    if table is None or len(table) == 0:
        return spark.createDataFrame([], TERMINAL_TABLE_SCHEMA)
    pdf = table[fx.TERMINAL_TABLE_COLUMNS].copy()
    pdf["day"] = pdf["day"].astype(np.int64)
    return spark.createDataFrame(pdf, TERMINAL_TABLE_SCHEMA)


def _terminal_step(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    step_columns = [name for name in (f.split()[0] for f in CUSTOMER_STEP_SCHEMA.split(", "))]
    for pdf in frames:
        terminal = fx.terminal_features(pdf, fx.to_ms(pdf["event_time"]))
        yield pd.concat([pdf[step_columns], terminal], axis=1)


def features_frame(transactions: DataFrame, terminal_table: pd.DataFrame | DataFrame | None) -> DataFrame:
    """Identifying columns, ``day`` and ``FEATURES`` of every transaction (static or streaming)."""
    spark = transactions.sparkSession
    terminals = terminal_table if isinstance(terminal_table, DataFrame) else terminal_frame(spark, terminal_table)
    stepped = customer_step(transactions)
    joined = stepped.join(F.broadcast(terminals), on=["terminal_id", "day"], how="left")
    return joined.mapInPandas(_terminal_step, FEATURES_SCHEMA).select(*CARRIED, "day", *fx.FEATURES)
