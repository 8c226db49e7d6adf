"""ml_score's streaming features keep their per-customer history in buckets of customers
(``models.spark_features.bucket_step``): the same features as one customer at a time, to the bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from common.keyed_histories import KeyedHistories
from models import features as fx
from models import spark_features

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
            out.append(spark_features._customer_step(rows, hist_t, hist_a))
            ordered = rows.sort_values(["event_time", "txn_id"], kind="mergesort")
            all_t = np.concatenate([hist_t, fx.to_ms(ordered["event_time"])])
            all_a = np.concatenate([hist_a, ordered["amount"].to_numpy()])
            keep = all_t > all_t.max() - spark_features.KEEP_MS
            order = np.argsort(all_t[keep], kind="stable")
            history[customer] = (all_t[keep][order], all_a[keep][order])
    return pd.concat(out, ignore_index=True)


def by_txn(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values("txn_id").reset_index(drop=True)


def test_a_bucket_computes_every_customers_features_as_if_each_had_its_own_state():
    rng = np.random.default_rng(7)
    batches = [batch(rng, T0_MS + i * 10 * fx.DAY_MS, 400, customers=40) for i in range(4)]
    histories = KeyedHistories()
    got = []
    for frame in batches:
        got.append(spark_features.bucket_step(histories, frame))
        histories = KeyedHistories.decode(histories.encode())   # what Spark stores between batches
    expected = by_txn(one_customer_at_a_time(batches))
    actual = by_txn(pd.concat(got, ignore_index=True))
    pd.testing.assert_frame_equal(actual[expected.columns], expected, check_exact=True)


def state(value, watermark_ms: int, timed_out: bool = False) -> GroupState:
    """The state Spark hands to a call: the stored value (or none) and the batch's watermark."""
    return GroupState(optionalValue=value, batchProcessingTimeMs=watermark_ms, eventTimeWatermarkMs=watermark_ms,
                      timeoutConf=GroupStateTimeout.EventTimeTimeout, hasTimedOut=timed_out, watermarkPresent=True,
                      defined=value is not None, updated=False, removed=False, timeoutTimestamp=-1,
                      keyAsUnsafe=b"", valueSchema=None)


def test_a_customer_idle_for_longer_than_the_windows_is_forgotten_with_its_bucket():
    frame = batch(np.random.default_rng(3), T0_MS, 50, customers=5)
    first = state(None, T0_MS)
    assert len(list(spark_features._streaming_function((1,), iter([frame]), first))[0]) == 50
    oldest_newest = min(int(fx.to_ms(rows["event_time"]).max()) for _, rows in frame.groupby("customer_id"))
    assert first._timeout_timestamp == oldest_newest + spark_features.KEEP_MS   # due when the first goes idle
    newest = int(fx.to_ms(frame["event_time"]).max())
    timed_out = state(first._value, newest + spark_features.KEEP_MS + 1, timed_out=True)
    assert list(spark_features._streaming_function((1,), iter([]), timed_out)) == []
    assert timed_out._removed
