"""The model's features, defined once: the Fraud-Detection Handbook's fifteen (Le Borgne et al., ch. 3.4).

Every number the model sees is computed by the pandas/numpy functions of this module, on both paths:

* batch (training, ``models.training``): ``build_features(transactions, terminal_table)`` over the whole
  simulated history at once;
* Spark (the ``ml_score`` detector, ``models.spark_features``): the very same ``row_features`` and
  ``customer_window_stats`` run inside ``applyInPandas`` (static DataFrame) or ``applyInPandasWithState``
  (stream), and the terminal features come from the same ``terminal_feature_table``.

Spark contributes only an equality join on ``(terminal_id, day)`` and the ``fillna(0)`` of
``TERMINAL_FEATURES`` (written in ``fill_terminal_defaults``'s docstring, tested for parity), so the two
paths cannot drift: there is no second implementation of any window, flag or ratio to keep in step.

Where the state lives, and why
------------------------------
* **Customer windows (count and mean amount over 1, 7, 30 days) are streamed.** They need only the
  customer's own recent transactions, which the stream has: ``applyInPandasWithState`` keyed by
  ``customer_id`` keeps each customer's last 30 days (+ one day of margin for late rows) of (event time,
  amount) as 16 bytes per transaction, evicted by an event-time timeout. A table would be stale by up to
  its refresh period exactly where it matters most (a card being drained right now raises its 1-day
  count and mean within minutes).
* **Terminal count and fraud risk (1, 7, 30 days, shifted by the 7-day label delay) are a batch feature
  table.** They need *labels*, which arrive late (chargebacks, investigations) and never on the
  transactions stream: they are by nature a daily batch job over labelled history. Because of the 7-day
  delay, the table for day D depends only on days up to D-8, so a table refreshed once a day is never
  stale. ``terminal_feature_table`` produces one row per (terminal, day) with activity; the runner (or
  a test) hands it to the detector as data in its parameters, the detector never reads a file.

Definitions (Handbook 3.4, with two documented simplifications)
--------------------------------------------------------------
* ``amount``; ``is_weekend`` (Saturday or Sunday, UTC); ``is_night`` (hour <= 6, UTC).
* ``customer_nb_tx_{w}d`` / ``customer_avg_amount_{w}d``: the customer's transactions in the half-open
  event-time window ``(t - w days, t]``, the transaction itself included (pandas ``rolling('wd')``
  semantics; ties in event time are ordered by ``txn_id``).
* ``terminal_nb_tx_{w}d`` / ``terminal_risk_{w}d``: count and fraud share of the terminal's transactions on
  the ``w`` whole UTC days ``D-7-w .. D-8`` for a transaction on day ``D`` (the Handbook uses the exact
  window ``(t-7d-w, t-7d]``; whole days are what a daily labelled batch can know). No transactions: 0.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd

FEATURES_VERSION = "1"
CUSTOMER_WINDOWS_DAYS = (1, 7, 30)
TERMINAL_WINDOWS_DAYS = (1, 7, 30)
DELAY_DAYS = 7
NIGHT_LAST_HOUR = 6                    # 00:00-06:59 counts as night (Handbook: hour <= 6)
DAY_MS = 86_400_000

ROW_FEATURES = ["amount", "is_weekend", "is_night"]
CUSTOMER_FEATURES = [f"customer_{kind}_{w}d" for w in CUSTOMER_WINDOWS_DAYS for kind in ("nb_tx", "avg_amount")]
TERMINAL_FEATURES = [f"terminal_{kind}_{w}d" for w in TERMINAL_WINDOWS_DAYS for kind in ("nb_tx", "risk")]
FEATURES = ROW_FEATURES + CUSTOMER_FEATURES + TERMINAL_FEATURES

# How long a customer's history must be kept to compute its windows (streaming state).
CUSTOMER_HISTORY_MS = max(CUSTOMER_WINDOWS_DAYS) * DAY_MS


def feature_signature() -> str:
    """A short hash of the feature definitions: the names, windows, delay and flags' cut-offs.

    Stored with every model; ``models.registry.load`` refuses a model whose signature differs. Bump
    ``FEATURES_VERSION`` whenever a definition changes without its name changing.
    """
    spec = {"version": FEATURES_VERSION, "features": FEATURES, "customer_windows": CUSTOMER_WINDOWS_DAYS,
            "terminal_windows": TERMINAL_WINDOWS_DAYS, "delay_days": DELAY_DAYS, "night": NIGHT_LAST_HOUR}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Row features
# ---------------------------------------------------------------------------------------------

def to_ms(event_time: pd.Series) -> np.ndarray:
    """Event times (naive UTC, as Spark hands them to pandas, or tz-aware) as int64 epoch milliseconds."""
    values = pd.to_datetime(event_time)
    if getattr(values.dt, "tz", None) is not None:
        values = values.dt.tz_convert("UTC").dt.tz_localize(None)
    return values.to_numpy(dtype="datetime64[ms]").astype(np.int64)


def day_of(t_ms: np.ndarray) -> np.ndarray:
    """UTC day number (days since 1970-01-01) of epoch milliseconds: the terminal table's join key."""
    return np.floor_divide(t_ms, DAY_MS).astype(np.int64)


def row_features(t_ms: np.ndarray, amount: np.ndarray) -> pd.DataFrame:
    """``amount``, ``is_weekend``, ``is_night`` and the join key ``day`` of each transaction."""
    day = day_of(t_ms)
    weekday = (day + 3) % 7                     # 1970-01-01 was a Thursday (Monday = 0)
    hour = (t_ms - day * DAY_MS) // 3_600_000
    return pd.DataFrame({
        "amount": np.asarray(amount, dtype=np.float64),
        "is_weekend": (weekday >= 5).astype(np.float64),
        "is_night": (hour <= NIGHT_LAST_HOUR).astype(np.float64),
        "day": day,
    })


# ---------------------------------------------------------------------------------------------
# Customer windows
# ---------------------------------------------------------------------------------------------

def customer_window_stats(group: np.ndarray, t_ms: np.ndarray, amount: np.ndarray) -> pd.DataFrame:
    """Count and mean amount of each row's group over ``(t - w, t]`` for every customer window ``w``.

    Rows must be sorted by (group, event time, tie-breaker); ``group`` is an integer code per customer.
    A row counts itself and the rows before it in that order (pandas ``rolling`` semantics). Vectorised:
    one ``searchsorted`` per window over a (group, time) key, sums from a cumulative sum.
    """
    n = len(t_ms)
    out: dict[str, np.ndarray] = {}
    if n == 0:
        return pd.DataFrame({name: np.zeros(0) for name in CUSTOMER_FEATURES})
    group = np.asarray(group, dtype=np.int64)
    t = np.asarray(t_ms, dtype=np.int64)
    # Sums in integer cents (amounts have at most 2 decimals): exact, so the batch path (whole history)
    # and the streaming path (history in state + new rows) give bit-identical means.
    cents = np.rint(np.asarray(amount, dtype=np.float64) * 100).astype(np.int64)
    t0 = int(t.min())
    span = int(t.max()) - t0 + CUSTOMER_HISTORY_MS + 1     # keys of two groups never overlap
    key = group * span + (t - t0)
    position = np.arange(n)
    csum = np.concatenate([[0], np.cumsum(cents)])
    for w in CUSTOMER_WINDOWS_DAYS:
        left = np.searchsorted(key, key - w * DAY_MS, side="right")
        count = position - left + 1
        total = csum[position + 1] - csum[left]
        out[f"customer_nb_tx_{w}d"] = count.astype(np.float64)
        out[f"customer_avg_amount_{w}d"] = total / count / 100.0
    return pd.DataFrame(out)[CUSTOMER_FEATURES]


def customer_features(customer_id: pd.Series, t_ms: np.ndarray, amount: np.ndarray,
                      tie_breaker: pd.Series) -> pd.DataFrame:
    """``CUSTOMER_FEATURES`` of transactions in any order, aligned with the input rows."""
    frame = pd.DataFrame({"c": pd.Categorical(customer_id).codes.astype(np.int64), "t": t_ms,
                          "a": np.asarray(amount, dtype=np.float64), "k": np.asarray(tie_breaker)})
    frame = frame.sort_values(["c", "t", "k"], kind="mergesort")
    stats = customer_window_stats(frame["c"].to_numpy(), frame["t"].to_numpy(), frame["a"].to_numpy())
    stats.index = frame.index
    return stats.sort_index().reset_index(drop=True)


def customer_features_with_history(hist_t_ms: np.ndarray, hist_amount: np.ndarray, t_ms: np.ndarray,
                                   amount: np.ndarray, tie_breaker: np.ndarray) -> pd.DataFrame:
    """``CUSTOMER_FEATURES`` of one customer's new transactions given its earlier ones (the streaming
    step): the same ``customer_window_stats`` over history + new rows, history first on equal times."""
    n_hist = len(hist_t_ms)
    frame = pd.DataFrame({
        "t": np.concatenate([np.asarray(hist_t_ms, dtype=np.int64), np.asarray(t_ms, dtype=np.int64)]),
        "h": np.r_[np.zeros(n_hist, dtype=np.int8), np.ones(len(t_ms), dtype=np.int8)],
        "k": np.concatenate([np.full(n_hist, "", dtype=object), np.asarray(tie_breaker, dtype=object)]),
        "a": np.concatenate([np.asarray(hist_amount, dtype=np.float64), np.asarray(amount, dtype=np.float64)]),
    })
    frame = frame.sort_values(["t", "h", "k"], kind="mergesort")
    stats = customer_window_stats(np.zeros(len(frame), dtype=np.int64), frame["t"].to_numpy(),
                                  frame["a"].to_numpy())
    stats.index = frame.index
    return stats.loc[np.arange(n_hist, n_hist + len(t_ms))].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# Terminal table (batch, from labelled history)
# ---------------------------------------------------------------------------------------------

def terminal_feature_table(terminal_id: pd.Series, t_ms: np.ndarray, is_fraud: np.ndarray,
                           first_day: int | None = None, last_day: int | None = None) -> pd.DataFrame:
    """One row per (terminal, day) of ``first_day..last_day`` with ``TERMINAL_FEATURES``.

    Built from labelled history only: the row of day D uses the days ``D-7-w .. D-8``, so labels known
    by day D suffice. Rows whose 30-day window saw no transaction are left out: a missing row means 0
    for every terminal feature (``fill_terminal_defaults``). Defaults: from the first labelled day to
    ``DELAY_DAYS + 1`` days after the last one (the last day whose windows are fully labelled).
    """
    columns = ["terminal_id", "day"] + TERMINAL_FEATURES
    if len(t_ms) == 0:
        empty = {"terminal_id": pd.Series([], dtype=object), "day": pd.Series([], dtype=np.int64)}
        return pd.DataFrame({**empty, **{name: pd.Series([], dtype=np.float64) for name in TERMINAL_FEATURES}})
    day = day_of(np.asarray(t_ms, dtype=np.int64))
    d0, d1 = int(day.min()), int(day.max())
    first_day = d0 if first_day is None else int(first_day)
    last_day = d1 + DELAY_DAYS + 1 if last_day is None else int(last_day)
    codes, terminals = pd.factorize(pd.Series(terminal_id).astype(str), sort=True)
    lo = min(d0, first_day - DELAY_DAYS - max(TERMINAL_WINDOWS_DAYS))
    n_days = max(d1, last_day) - lo + 1
    counts = np.zeros((len(terminals), n_days + 1))
    frauds = np.zeros((len(terminals), n_days + 1))
    np.add.at(counts, (codes, day - lo + 1), 1.0)
    np.add.at(frauds, (codes, day - lo + 1), np.asarray(is_fraud, dtype=np.float64))
    c_cum, f_cum = np.cumsum(counts, axis=1), np.cumsum(frauds, axis=1)   # [:, i] = days lo..lo+i-1
    targets = np.arange(first_day, last_day + 1)
    end = targets - DELAY_DAYS - lo                                         # exclusive: up to day D-8
    parts = {}
    for w in TERMINAL_WINDOWS_DAYS:
        start = np.clip(end - w, 0, None)
        nb = c_cum[:, end] - c_cum[:, start]
        fr = f_cum[:, end] - f_cum[:, start]
        parts[f"terminal_nb_tx_{w}d"] = nb
        parts[f"terminal_risk_{w}d"] = np.divide(fr, nb, out=np.zeros_like(fr), where=nb > 0)
    keep = parts[f"terminal_nb_tx_{max(TERMINAL_WINDOWS_DAYS)}d"] > 0
    rows, cols = np.nonzero(keep)
    table = pd.DataFrame({"terminal_id": np.asarray(terminals, dtype=object)[rows],
                          "day": targets[cols].astype(np.int64)})
    for name in TERMINAL_FEATURES:
        table[name] = parts[name][rows, cols]
    return table[columns].reset_index(drop=True)


def fill_terminal_defaults(frame: pd.DataFrame) -> pd.DataFrame:
    """A transaction whose (terminal, day) has no row in the table gets 0 for every terminal feature
    (no transaction seen in the windows: no count, no known risk). The Spark path does the same with
    ``fillna(0, subset=TERMINAL_FEATURES)`` after its left join."""
    frame[TERMINAL_FEATURES] = frame[TERMINAL_FEATURES].astype(np.float64).fillna(0.0)
    return frame


# ---------------------------------------------------------------------------------------------
# The batch path, end to end
# ---------------------------------------------------------------------------------------------

def build_features(transactions: pd.DataFrame, terminal_table: pd.DataFrame) -> pd.DataFrame:
    """The feature frame of ``transactions`` (columns txn_id, customer_id, terminal_id, amount,
    event_time, ...), aligned with its rows: the identifying columns, ``day`` and ``FEATURES``."""
    txns = transactions.reset_index(drop=True)
    t_ms = to_ms(txns["event_time"])
    rows = row_features(t_ms, txns["amount"].to_numpy())
    cust = customer_features(txns["customer_id"], t_ms, txns["amount"].to_numpy(), txns["txn_id"])
    keep = [c for c in ("txn_id", "card_id", "customer_id", "terminal_id", "event_time") if c in txns]
    frame = pd.concat([txns[keep], rows, cust], axis=1)
    frame = frame.merge(terminal_table[["terminal_id", "day"] + TERMINAL_FEATURES], how="left",
                        on=["terminal_id", "day"], validate="many_to_one")
    return fill_terminal_defaults(frame)[keep + ["day"] + FEATURES]
