"""Feature maths of models/features.py on tiny hand-made data (no Spark)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models import features as fx

T0 = pd.Timestamp("2026-01-05 10:00:00")      # a Monday
DAY = pd.Timedelta(days=1)


def _txns(rows):
    """rows: (txn_id, customer, terminal, amount, event_time)."""
    return pd.DataFrame(rows, columns=["txn_id", "customer_id", "terminal_id", "amount", "event_time"])


def test_feature_list_is_the_handbooks_fifteen_plus_nine_on_the_customers_amounts():
    assert len(fx.HANDBOOK_FEATURES) == 15 and set(fx.HANDBOOK_FEATURES) <= set(fx.FEATURES)
    assert len(fx.FEATURES) == 24 and len(set(fx.FEATURES)) == 24
    assert fx.FEATURES[:3] == ["amount", "is_weekend", "is_night"]
    assert "customer_avg_amount_30d" in fx.FEATURES and "terminal_risk_7d" in fx.FEATURES
    assert {"customer_std_amount_7d", "amount_to_avg_30d", "amount_zscore_1d"} <= set(fx.FEATURES)


def test_weekend_night_and_day():
    times = pd.Series(pd.to_datetime(["2026-01-05 06:59:59", "2026-01-05 07:00:00",    # Monday
                                      "2026-01-10 12:00:00", "2026-01-11 00:00:00"]))  # Saturday, Sunday
    rows = fx.row_features(fx.to_ms(times), np.array([1.0, 2.0, 3.0, 4.0]))
    assert rows["is_night"].tolist() == [1.0, 0.0, 0.0, 1.0]
    assert rows["is_weekend"].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert rows["day"].tolist() == [20458, 20458, 20463, 20464]   # days since 1970-01-01


def test_to_ms_accepts_naive_and_aware_times():
    naive = pd.Series(pd.to_datetime(["2026-01-05 10:00:00.123"]))
    aware = naive.dt.tz_localize("UTC")
    assert fx.to_ms(naive).tolist() == fx.to_ms(aware).tolist() == [1_767_607_200_123]


def test_customer_windows_count_and_mean_including_the_transaction_itself():
    txns = _txns([
        ("a1", "A", "T", 10.00, T0),
        ("a2", "A", "T", 20.00, T0 + pd.Timedelta(hours=2)),
        ("b1", "B", "T", 99.99, T0 + pd.Timedelta(hours=3)),
        ("a3", "A", "T", 30.00, T0 + DAY),                          # exactly 1 day after a1: a1 is out of 1d
        ("a4", "A", "T", 40.00, T0 + 10 * DAY),                     # only a4 in 1d and 7d; all four in 30d
    ])
    out = fx.customer_features(txns["customer_id"], fx.to_ms(txns["event_time"]), txns["amount"], txns["txn_id"])
    assert out["customer_nb_tx_1d"].tolist() == [1, 2, 1, 2, 1]
    assert out["customer_avg_amount_1d"].tolist() == [10.0, 15.0, 99.99, 25.0, 40.0]
    assert out["customer_nb_tx_7d"].tolist() == [1, 2, 1, 3, 1]
    assert out["customer_avg_amount_7d"].tolist() == [10.0, 15.0, 99.99, 20.0, 40.0]
    assert out["customer_nb_tx_30d"].tolist() == [1, 2, 1, 3, 4]
    assert out["customer_avg_amount_30d"].tolist() == [10.0, 15.0, 99.99, 20.0, 25.0]


def test_amount_spread_ratio_and_zscore_over_the_customers_windows():
    txns = _txns([
        ("a1", "A", "T", 10.00, T0),
        ("a2", "A", "T", 30.00, T0 + pd.Timedelta(hours=1)),
        ("a3", "A", "T", 100.00, T0 + pd.Timedelta(hours=2)),     # mean 46.67, std 38.87 over the day
        ("b1", "B", "T", 0.00, T0),                                 # a free transaction: floors apply
    ])
    out = fx.customer_features(txns["customer_id"], fx.to_ms(txns["event_time"]), txns["amount"], txns["txn_id"])
    assert out["customer_std_amount_1d"].tolist() == pytest.approx([0.0, 10.0, np.std([10, 30, 100]), 0.0])
    assert out["amount_to_avg_1d"].tolist() == pytest.approx([1.0, 1.5, 100 / (140 / 3), 0.0])
    assert out["amount_zscore_1d"].tolist() == pytest.approx(
        [0.0, 10 / 10, (100 - 140 / 3) / np.std([10, 30, 100]), 0.0])   # std floored at 1.00


def test_customer_windows_agree_with_pandas_rolling():
    rng = np.random.default_rng(3)
    n = 400
    txns = _txns([(f"t{i:04d}", f"c{rng.integers(5)}", "T", round(float(rng.uniform(1, 200)), 2),
                   T0 + pd.Timedelta(seconds=int(rng.integers(0, 60 * 86400)))) for i in range(n)])
    out = fx.customer_features(txns["customer_id"], fx.to_ms(txns["event_time"]), txns["amount"], txns["txn_id"])
    ordered = txns.assign(i=range(n)).sort_values(["customer_id", "event_time", "txn_id"])
    for w in fx.CUSTOMER_WINDOWS_DAYS:
        rolled = ordered.groupby("customer_id").rolling(f"{w}D", on="event_time")["amount"]
        count, mean, std = rolled.count().to_numpy(), rolled.mean().to_numpy(), rolled.std(ddof=0).to_numpy()
        idx = ordered["i"].to_numpy()
        assert np.array_equal(out[f"customer_nb_tx_{w}d"].to_numpy()[idx], count)
        assert np.allclose(out[f"customer_avg_amount_{w}d"].to_numpy()[idx], mean, rtol=1e-12)
        assert np.allclose(out[f"customer_std_amount_{w}d"].to_numpy()[idx], std, rtol=1e-9, atol=1e-9)


def test_streaming_step_with_history_equals_batch():
    rng = np.random.default_rng(5)
    times = np.sort(rng.integers(0, 40 * 86_400_000, 60)) + fx.to_ms(pd.Series([T0]))[0]
    amounts = np.round(rng.uniform(1, 100, 60), 2)
    ids = np.array([f"t{i:03d}" for i in range(60)], dtype=object)
    batch = fx.customer_features(pd.Series(["A"] * 60), times, amounts, pd.Series(ids))
    step = fx.customer_features_with_history(times[:45], amounts[:45], times[45:], amounts[45:], ids[45:])
    pd.testing.assert_frame_equal(step, batch.iloc[45:].reset_index(drop=True))


def test_a_hot_customer_counts_its_last_rows_only_in_batch_and_stream_alike():
    """A shared "guest" customer id with thousands of transactions a day: each row's windows count at most
    CUSTOMER_HISTORY_MAX_ROWS rows before it, on the batch path and from the capped streaming history
    (what ``with_history(max_entries=...)`` hands over) to the bit."""
    cap, n = fx.CUSTOMER_HISTORY_MAX_ROWS, fx.CUSTOMER_HISTORY_MAX_ROWS * 3
    rng = np.random.default_rng(9)
    times = np.sort(rng.integers(0, 86_400_000, n)) + fx.to_ms(pd.Series([T0]))[0]
    amounts = np.round(rng.uniform(1, 100, n), 2)
    batch = fx.customer_features(pd.Series(["guest"] * n), times, amounts,
                                 pd.Series([f"t{i:05d}" for i in range(n)]))
    assert batch["customer_nb_tx_1d"].tolist() == [float(min(i, cap) + 1) for i in range(n)]
    rows = np.arange(n - 50, n)              # the last rows, each with the capped history it would get
    lengths = np.full(len(rows), cap)
    history = np.concatenate([np.arange(i - cap, i) for i in rows])
    step = fx.customer_features_from_histories(times[rows], amounts[rows], lengths, times[history], amounts[history])
    pd.testing.assert_frame_equal(step, batch.iloc[rows].reset_index(drop=True), check_exact=True)


def _terminal(table: pd.DataFrame, terminal: str, at: pd.Timestamp) -> pd.Series:
    """The terminal features of one transaction at ``terminal`` and time ``at`` (the batch path's join)."""
    t_ms = fx.to_ms(pd.Series([at]))
    key = pd.DataFrame({"terminal_id": [terminal], "day": fx.day_of(t_ms)})
    rows = key.merge(table, how="left", on=["terminal_id", "day"])
    return fx.terminal_features(rows, t_ms).iloc[0]


def test_terminal_windows_end_exactly_seven_days_before_the_transaction():
    day0 = pd.Timestamp("2026-01-01")
    rows = [("T", day0 + pd.Timedelta(hours=12), 1), ("T", day0 + pd.Timedelta(hours=13), 0),
            ("T", day0 + DAY + pd.Timedelta(hours=1), 0), ("U", day0 + 5 * DAY, 1)]
    term = pd.Series([r[0] for r in rows])
    t_ms = fx.to_ms(pd.Series([r[1] for r in rows]))
    d = int(fx.day_of(t_ms)[0])
    table = fx.terminal_feature_table(term, t_ms, np.array([r[2] for r in rows]), d, d + 40)
    keys = set(zip(table["terminal_id"], table["day"]))
    assert ("T", d + 6) not in keys and ("T", d + 7) in keys      # day d's labels are 7 days old on d+7
    # on day d+7 a transaction sees day d's transactions up to 7 days before it, no more
    assert _terminal(table, "T", day0 + 7 * DAY + pd.Timedelta(hours=11))["terminal_nb_tx_1d"] == 0
    at_1230 = _terminal(table, "T", day0 + 7 * DAY + pd.Timedelta(hours=12, minutes=30))
    assert at_1230["terminal_nb_tx_1d"] == 1 and at_1230["terminal_risk_1d"] == 1.0
    at_13 = _terminal(table, "T", day0 + 7 * DAY + pd.Timedelta(hours=13))     # t - 7 d itself is included
    assert at_13["terminal_nb_tx_1d"] == 2 and at_13["terminal_risk_1d"] == 0.5
    # on day d+8: all of day d (whole), and day d+1 up to t - 7 d
    early = _terminal(table, "T", day0 + 8 * DAY)
    assert early["terminal_nb_tx_1d"] == 2 and early["terminal_risk_1d"] == 0.5
    later = _terminal(table, "T", day0 + 8 * DAY + pd.Timedelta(hours=2))
    assert later["terminal_nb_tx_7d"] == 3 and later["terminal_risk_7d"] == pytest.approx(1 / 3)
    # the 1-day window starts on day D-8: on day d+9 day d has left it, not the 7-day one
    next_day = _terminal(table, "T", day0 + 9 * DAY)
    assert next_day["terminal_nb_tx_1d"] == 1 and next_day["terminal_risk_1d"] == 0.0
    assert next_day["terminal_nb_tx_7d"] == 3
    # the 30-day window covers whole days D-37 .. D-8: day d+1 is in it until day d+38
    assert _terminal(table, "T", day0 + 38 * DAY)["terminal_nb_tx_30d"] == 1
    assert ("T", d + 39) not in keys and _terminal(table, "T", day0 + 39 * DAY)["terminal_nb_tx_30d"] == 0
    assert _terminal(table, "U", day0 + 13 * DAY)["terminal_risk_30d"] == 1.0


def test_build_features_fills_unknown_terminals_with_zero():
    txns = _txns([("a1", "A", "NEW", 12.5, T0)])
    empty = fx.terminal_feature_table(pd.Series([], dtype=str), np.zeros(0, dtype=np.int64), np.zeros(0))
    frame = fx.build_features(txns, empty)
    assert list(frame.columns[-len(fx.FEATURES):]) == fx.FEATURES
    assert (frame[fx.TERMINAL_FEATURES] == 0).all(axis=None)
    assert frame.loc[0, "amount"] == 12.5 and frame.loc[0, "customer_nb_tx_30d"] == 1
