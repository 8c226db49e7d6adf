"""ml_score's streaming features from each row's own history (``detectors.ml_features.customer_step_from_history``,
the rows as ``detectors.operators.with_history`` hands them over): the same features as one customer at a time
with its history kept apart, to the bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from models import features as fx
from detectors import ml_features

pytestmark = pytest.mark.unit

T0_MS = 1_767_600_000_000          # 2026-01-05 08:00 UTC


def batch(rng: np.random.Generator, start_ms: int, n: int, customers: int) -> pd.DataFrame:
    t = start_ms + np.sort(rng.integers(0, 3 * fx.DAY_MS, n))
    t[5:8] = t[4]                                  # equal event times: the tie-breaker decides
    frame = pd.DataFrame({
        "txn_id": [f"t-{start_ms}-{i:05d}" for i in range(n)],
        "card_id": [f"card-{c:03d}" for c in rng.integers(0, customers, n)],
        "customer_id": [f"cust-{c:03d}" for c in rng.integers(0, customers, n)],
        "merchant_id": "m", "terminal_id": "term", "currency": "EUR", "channel": "pos", "lat": 1.0, "lon": 2.0,
        "event_time": pd.to_datetime(t, unit="ms"), "ingested_at": pd.NaT,
        "amount": np.round(rng.gamma(2.0, 30.0, n), 2),
    })
    return frame.sample(frac=1.0, random_state=1).reset_index(drop=True)   # arrival order is not time order


def one_customer_at_a_time(batches: list[pd.DataFrame]) -> pd.DataFrame:
    """The specification: each customer's history kept apart, ``_customer_step`` on its rows."""
    history: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    out = []
    for frame in batches:
        for customer, rows in frame.groupby("customer_id"):
            hist_t, hist_a = history.get(customer, (np.zeros(0, dtype=np.int64), np.zeros(0)))
            out.append(ml_features._customer_step(rows, hist_t, hist_a))
            ordered = rows.sort_values(["event_time", "txn_id"], kind="mergesort")
            all_t = np.concatenate([hist_t, fx.to_ms(ordered["event_time"])])
            all_a = np.concatenate([hist_a, ordered["amount"].to_numpy()])
            keep = all_t > all_t.max() - ml_features.KEEP_MS
            order = np.argsort(all_t[keep], kind="stable")
            history[customer] = (all_t[keep][order], all_a[keep][order])
    return pd.concat(out, ignore_index=True)


def by_txn(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("txn_id").reset_index(drop=True)


def with_histories(batches: list[pd.DataFrame]) -> list[pd.DataFrame]:
    """Each batch's rows with their customer's history, as ``with_history`` specifies it (the Java operator
    is held to that in tests/integration/operators/test_with_history.py): a customer's rows by (time, id), each with
    the pairs learnt before it; at the batch's end, pairs KEEP_MS or more older than the newest forgotten."""
    learnt: dict[str, list[tuple[int, float]]] = {}
    out = []
    for frame in batches:
        rows = frame.assign(_t=fx.to_ms(frame["event_time"])).sort_values(["customer_id", "_t", "txn_id"])
        times, amounts = [], []
        for customer, t, amount in zip(rows["customer_id"], rows["_t"], rows["amount"]):
            entries = learnt.setdefault(customer, [])
            times.append(np.array([e[0] for e in entries], dtype=np.int64))
            amounts.append(np.array([e[1] for e in entries]))
            entries.append((int(t), float(amount)))
        for customer, entries in learnt.items():
            newest = max(t for t, _ in entries)
            learnt[customer] = [e for e in entries if e[0] > newest - ml_features.KEEP_MS]
        out.append(rows.drop(columns="_t").assign(history_ms=times, history_amounts=amounts).reset_index(drop=True))
    return out


def test_features_from_each_rows_history_are_those_of_each_customer_with_its_own_state():
    rng = np.random.default_rng(7)
    batches = [batch(rng, T0_MS + i * 10 * fx.DAY_MS, 400, customers=40) for i in range(4)]
    # a late batch: its rows precede rows already learnt (those must not count)
    batches.append(batch(rng, T0_MS + 35 * fx.DAY_MS, 100, customers=40))
    got = [ml_features.customer_step_from_history(frame) for frame in with_histories(batches)]
    expected = by_txn(one_customer_at_a_time(batches))
    actual = by_txn(pd.concat(got, ignore_index=True))
    pd.testing.assert_frame_equal(actual[expected.columns], expected, check_exact=True)


def test_a_row_without_history_counts_itself_only():
    frame = batch(np.random.default_rng(3), T0_MS, 10, customers=1).iloc[:1]
    [row] = with_histories([frame])
    out = ml_features.customer_step_from_history(row)
    assert out["customer_nb_tx_30d"].tolist() == [1.0] and out["customer_std_amount_30d"].tolist() == [0.0]
