"""ml_score finds each transaction's terminal rows in a ``TerminalLookup`` instead of joining the table in
every micro-batch: the same rows as the batch path's left merge, hence the same terminal features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models import features as fx
from models.terminal_lookup import TerminalLookup

pytestmark = pytest.mark.unit

DAY0 = 20_460                      # 2026-01-05


def labelled_history(rng: np.random.Generator, n: int = 3_000) -> tuple[pd.Series, np.ndarray, np.ndarray]:
    terminals = pd.Series([f"term-{t:03d}" for t in rng.integers(0, 40, n)])
    t_ms = np.sort(DAY0 * fx.DAY_MS + rng.integers(0, 20 * fx.DAY_MS, n))
    return terminals, t_ms, (rng.random(n) < 0.05).astype(float)


def merged_rows(table: pd.DataFrame, terminal_id: pd.Series, day: np.ndarray) -> pd.DataFrame:
    """The batch path's left merge (``features.build_features``)."""
    frame = pd.DataFrame({"terminal_id": terminal_id, "day": day})
    return frame.merge(table[fx.TERMINAL_TABLE_COLUMNS], how="left", on=["terminal_id", "day"],
                       validate="many_to_one")


def test_lookup_gives_the_merges_terminal_features_including_unknown_terminals_and_days():
    rng = np.random.default_rng(3)
    table = fx.terminal_feature_table(*labelled_history(rng))
    n = 2_000
    # Known terminals on days in and out of the table, and terminals the table never saw.
    terminal_id = pd.Series([f"term-{t:03d}" for t in rng.integers(0, 50, n)], index=np.arange(n) + 100)
    t_ms = (DAY0 - 3) * fx.DAY_MS + rng.integers(0, 30 * fx.DAY_MS, n)
    day = fx.day_of(t_ms)
    found = TerminalLookup(table).rows(terminal_id, day)
    merged = merged_rows(table, terminal_id.reset_index(drop=True), day)
    assert list(found.index) == list(terminal_id.index)
    missing = merged["days_nb_tx_1d"].isna().to_numpy()
    assert 0 < missing.sum() < n                    # both kinds of rows are in the test
    assert np.array_equal(found[fx.TERMINAL_DAY_COUNTS].to_numpy(), merged[fx.TERMINAL_DAY_COUNTS].to_numpy(),
                          equal_nan=True)
    expected = fx.terminal_features(merged, t_ms)
    actual = fx.terminal_features(found.reset_index(drop=True), t_ms)
    pd.testing.assert_frame_equal(actual, expected)


def test_an_empty_or_missing_table_finds_nothing():
    for table in (None, fx.terminal_feature_table(pd.Series([], dtype=object), np.zeros(0, np.int64), np.zeros(0))):
        rows = TerminalLookup(table).rows(pd.Series(["term-001", "x"]), np.array([DAY0, DAY0]))
        assert rows[fx.TERMINAL_DAY_COUNTS].isna().all().all()
        assert rows["recent_ms"].isna().all()


def test_a_table_with_two_rows_for_one_terminal_day_is_refused():
    table = fx.terminal_feature_table(*labelled_history(np.random.default_rng(1), 200))
    with pytest.raises(ValueError, match="more than one row"):
        TerminalLookup(pd.concat([table, table.iloc[:1]]))
