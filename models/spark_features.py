"""The Spark side of ``models.features``: the same functions, run in Spark on a static DataFrame or a stream.

``features_frame(transactions, terminal_table)`` turns parsed transactions (``TRANSACTION_SCHEMA``) into
the identifying columns plus ``FEATURES``:

1. group by ``customer_id`` and run ``features.row_features`` + ``features.customer_window_stats`` in
   pandas: ``applyInPandas`` on a static DataFrame (the whole history at once, like training), or
   ``applyInPandasWithState`` on a stream, grouped by a bucket of customers (``pmod(hash(customer_id),
   STATE_BUCKETS)``; Spark's Python state costs per group per batch, which per customer made a live
   batch of 1,000 transactions take seconds): a bucket's state holds each of its customers' last 30
   days + one day of margin of (event time, amount) pairs (``common.keyed_histories``); a customer is
   forgotten 31 days of event time after its last transaction; rows behind the watermark are dropped
   by the operator;
2. ``mapInPandas``: each row's ``(terminal_id, day)`` row of the terminal table, found in a
   ``models.terminal_lookup.TerminalLookup`` broadcast to the Python workers once (a join would rebuild
   the broadcast table in every micro-batch), then ``features.terminal_features`` on them (whole-day
   counts plus day D-7's labelled transactions up to ``t - 7 days``; a transaction without a row gets 0),
   as the batch path does after its merge.

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
from common.keyed_histories import STATE_SCHEMA, KeyedHistories
from common.state_timeouts import timeout_after
from models import features as fx
from models.terminal_lookup import TerminalLookup

# PySpark 4.0.0 worker bug in applyInPandasWithState (see common/pyspark_compat.py): installed at import so
# that every Python worker unpickling ``_streaming_function`` (this module) has it before the first batch.
pyspark_compat.install()

# Columns carried through the per-customer step (everything the alert needs, including its trigger
# context, plus the features; ``amount`` is a feature).
CARRIED = ["txn_id", "card_id", "customer_id", "merchant_id", "terminal_id", "currency", "channel",
           "lat", "lon", "event_time", "ingested_at"]
CUSTOMER_STEP_SCHEMA = ("txn_id string, card_id string, customer_id string, merchant_id string, "
                        "terminal_id string, currency string, channel string, lat double, lon double, "
                        "event_time timestamp, ingested_at timestamp, day long, "
                        + ", ".join(f"{name} double" for name in fx.ROW_FEATURES + fx.CUSTOMER_FEATURES))
HISTORY_MARGIN_MS = fx.DAY_MS    # kept beyond the longest window, for rows arriving late
KEEP_MS = fx.CUSTOMER_HISTORY_MS + HISTORY_MARGIN_MS
# Groups of the stateful step. A live batch touches every bucket and each call has a fixed pandas cost, so
# fewer buckets cost less per row (``python -m bench.ml_rows``; docs/performance.md, "Real time in make demo").
STATE_BUCKETS = 8


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


def bucket_step(histories: KeyedHistories, pdf: pd.DataFrame) -> pd.DataFrame:
    """Row and customer features of a bucket's new rows, every customer at once, given the histories
    of its customers (each a run of (event time, amount) pairs, interleaved as float64: times in ms are
    exact); the histories are updated with the new rows. Same statistics as ``_customer_step`` customer
    by customer: history first on equal times, then the new rows by (event time, txn_id)."""
    customers, code = np.unique(pdf["customer_id"].to_numpy(dtype=object).astype(str), return_inverse=True)
    values, lengths, last_ms, _ = histories.lookup(customers.tolist())
    pairs = lengths // 2
    hist_group = np.repeat(np.arange(len(customers)), pairs)
    new_t = fx.to_ms(pdf["event_time"])
    new_a = pdf["amount"].to_numpy(dtype=np.float64)
    n_hist = len(hist_group)
    group = np.concatenate([hist_group, code])
    t = np.concatenate([values[0::2].astype(np.int64), new_t])
    a = np.concatenate([values[1::2], new_a])
    h = np.r_[np.zeros(n_hist, dtype=np.int8), np.ones(len(pdf), dtype=np.int8)]
    k = np.concatenate([np.full(n_hist, "", dtype=object), pdf["txn_id"].to_numpy(dtype=object)]).astype(str)
    order = np.lexsort((k, h, t, group))
    stats = fx.customer_window_stats(group[order], t[order], a[order])
    new_rows = order >= n_hist                       # positions (in sorted order) of this batch's rows
    cust = stats[new_rows].reset_index(drop=True)
    picked = order[new_rows] - n_hist                # their rows in ``pdf``
    rows = pdf.iloc[picked].reset_index(drop=True)
    out = pd.concat([rows[CARRIED], fx.row_features(new_t[picked], new_a[picked]), cust], axis=1)
    # Each customer's history: its pairs within KEEP_MS of its newest event time, in time order.
    newest = np.maximum(last_ms, np.zeros(len(customers), dtype=np.int64))
    np.maximum.at(newest, group, t)
    g, tt, aa = group[order], t[order], a[order]
    keep = tt > newest[g] - KEEP_MS
    g, tt, aa = g[keep], tt[keep], aa[keep]
    counts = np.bincount(g, minlength=len(customers))
    histories.put_many(customers.tolist(), np.column_stack([tt.astype(np.float64), aa]).ravel(), counts * 2,
                       newest)
    return out


def _streaming_function(key: tuple, frames: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
    pyspark_compat.install()              # no-op once installed
    histories = KeyedHistories.decode(state.get) if state.exists else KeyedHistories()
    frames = [] if state.hasTimedOut else [f for f in frames if len(f)]
    out = bucket_step(histories, pd.concat(frames, ignore_index=True)) if frames else None
    # No transaction for 31 days of event time: the customer's history is useless (not one seen just now).
    histories.forget_idle(state.getCurrentWatermarkMs() - KEEP_MS)
    if len(histories) == 0:
        state.remove()
    else:
        state.update(histories.encode())
        state.setTimeoutTimestamp(timeout_after(state, histories.oldest_last_ms() + KEEP_MS))
    if out is not None:
        yield out


def customer_step(transactions: DataFrame) -> DataFrame:
    """Row + customer features, per customer in pandas (static: applyInPandas; stream: with state)."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    columns = transactions.select(*CARRIED, "amount")
    if transactions.isStreaming:
        bucket = F.pmod(F.hash("customer_id"), F.lit(STATE_BUCKETS)).alias("bucket")
        return (columns.select("*", bucket).groupBy("bucket")
                .applyInPandasWithState(_streaming_function, CUSTOMER_STEP_SCHEMA, STATE_SCHEMA, "append",
                                        GroupStateTimeout.EventTimeTimeout))
    return columns.groupBy("customer_id").applyInPandas(_static_function, CUSTOMER_STEP_SCHEMA)


FEATURES_SCHEMA = (CUSTOMER_STEP_SCHEMA + ", "
                   + ", ".join(f"{name} double" for name in fx.TERMINAL_FEATURES))


def _terminal_function(lookup):
    """``features.terminal_features`` of each row, its terminal's rows found in the broadcast ``lookup``."""
    step_columns = [name for name in (f.split()[0] for f in CUSTOMER_STEP_SCHEMA.split(", "))]

    def step(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        table = lookup.value                # unpickled once per Python worker, which Spark reuses
        for pdf in frames:
            rows = table.rows(pdf["terminal_id"], pdf["day"].to_numpy())
            terminal = fx.terminal_features(rows, fx.to_ms(pdf["event_time"]))
            yield pd.concat([pdf[step_columns], terminal], axis=1)

    return step


def features_frame(transactions: DataFrame, terminal_table: pd.DataFrame | None) -> DataFrame:
    """Identifying columns, ``day`` and ``FEATURES`` of every transaction (static or streaming)."""
    lookup = transactions.sparkSession.sparkContext.broadcast(TerminalLookup(terminal_table))
    stepped = customer_step(transactions)
    return stepped.mapInPandas(_terminal_function(lookup), FEATURES_SCHEMA).select(*CARRIED, "day", *fx.FEATURES)
