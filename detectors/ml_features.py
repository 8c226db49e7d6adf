"""The Spark side of ``models.features``: the same functions, run in Spark on a static DataFrame or a stream.

``features_frame(transactions, terminal_table)`` turns parsed transactions (``TRANSACTION_SCHEMA``) into
the identifying columns plus ``FEATURES``:

1. the row and customer features (``features.row_features``, the customer windows): on a static DataFrame,
   grouped by ``customer_id`` in pandas (``applyInPandas``, the whole history at once, like training); on a
   stream, ``detectors.operators.with_history`` (keyed JVM state, one row per customer) hands each transaction
   over with its customer's last 30 days + one day of margin of (event time, amount) pairs, and a
   stateless ``mapInPandas`` computes the windows from them (``features.customer_features_from_histories``,
   the same integer-cent sums); a customer is forgotten 31 days of event time after its last transaction;
   rows behind the watermark are dropped by the operator;
2. (in the same ``mapInPandas`` on a stream) each row's ``(terminal_id, day)`` row of the terminal table, found in a
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

from detectors.operators import with_history
from models import features as fx
from models.terminal_lookup import TerminalLookup

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
HISTORY_COLUMNS = ("history_ms", "history_amounts")


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


def customer_step(transactions: DataFrame) -> DataFrame:
    """Row + customer features, per customer in pandas (static DataFrames: ``applyInPandas``)."""
    columns = transactions.select(*CARRIED, "amount")
    return columns.groupBy("customer_id").applyInPandas(_static_function, CUSTOMER_STEP_SCHEMA)


def with_customer_history(transactions: DataFrame) -> DataFrame:
    """Each transaction with its customer's (event time, amount) pairs of the last ``KEEP_MS`` (a stream)."""
    keep_s = KEEP_MS / 1000
    return with_history(transactions.select(*CARRIED, "amount"), key="customer_id", value="amount",
                        max_entries=fx.CUSTOMER_HISTORY_MAX_ROWS, keep_seconds=keep_s, idle_seconds=keep_s,
                        names=HISTORY_COLUMNS)


def customer_step_from_history(pdf: pd.DataFrame) -> pd.DataFrame:
    """Row and customer features of rows carrying their customer's history (``with_customer_history``)."""
    t_ms = fx.to_ms(pdf["event_time"])
    amount = pdf["amount"].to_numpy(dtype=np.float64)
    lengths, history_t = fx.ragged(pdf[HISTORY_COLUMNS[0]], np.int64)
    _, history_a = fx.ragged(pdf[HISTORY_COLUMNS[1]], np.float64)
    cust = fx.customer_features_from_histories(t_ms, amount, lengths, history_t, history_a)
    return pd.concat([pdf[CARRIED].reset_index(drop=True), fx.row_features(t_ms, amount), cust], axis=1)


FEATURES_SCHEMA = (CUSTOMER_STEP_SCHEMA + ", "
                   + ", ".join(f"{name} double" for name in fx.TERMINAL_FEATURES))


def _terminal_function(lookup, from_history: bool = False):
    """``features.terminal_features`` of each row, its terminal's rows found in the broadcast ``lookup``;
    ``from_history``: the rows carry their customer's history, so the customer step comes first, in the
    same Python call (one round trip per batch on a stream)."""
    step_columns = [name for name in (f.split()[0] for f in CUSTOMER_STEP_SCHEMA.split(", "))]

    def step(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        table = lookup.value                # unpickled once per Python worker, which Spark reuses
        for pdf in frames:
            if from_history:
                pdf = customer_step_from_history(pdf)
            rows = table.rows(pdf["terminal_id"], pdf["day"].to_numpy())
            terminal = fx.terminal_features(rows, fx.to_ms(pdf["event_time"]))
            yield pd.concat([pdf[step_columns], terminal], axis=1)

    return step


def features_frame(transactions: DataFrame, terminal_table: pd.DataFrame | None) -> DataFrame:
    """Identifying columns, ``day`` and ``FEATURES`` of every transaction (static or streaming)."""
    lookup = transactions.sparkSession.sparkContext.broadcast(TerminalLookup(terminal_table))
    if transactions.isStreaming:
        featured = with_customer_history(transactions).mapInPandas(_terminal_function(lookup, from_history=True),
                                                                   FEATURES_SCHEMA)
    else:
        featured = customer_step(transactions).mapInPandas(_terminal_function(lookup), FEATURES_SCHEMA)
    return featured.select(*CARRIED, "day", *fx.FEATURES)
