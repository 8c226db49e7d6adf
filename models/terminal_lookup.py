"""The terminal feature table as sorted arrays, looked up in pandas where Spark would join it.

``ml_score`` used to broadcast-join the table (one row per terminal and day: 723,104 rows for the
demo's quick model) in every micro-batch: Spark builds the broadcast relation again for each batch,
about 0.7 s on two cores before a single row is scored. A ``TerminalLookup`` goes to the Python workers
once (a Spark broadcast variable, kept by each reused worker) and finds a batch's rows by binary search.
``rows`` gives what the left join gave: the table's columns aligned with the transactions, NaN counts
and no lists where a (terminal, day) has no row, for ``features.terminal_features``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from models import features as fx

_DAY_BITS = 32   # a key is (terminal code << 32) | day; days since 1970 fit easily


class TerminalLookup:
    def __init__(self, table: pd.DataFrame | None):
        if table is None or len(table) == 0:
            table = pd.DataFrame({name: pd.Series(dtype=object if name in fx.TERMINAL_RECENT or name == "terminal_id"
                                                  else np.float64) for name in fx.TERMINAL_TABLE_COLUMNS})
        terminals, codes = np.unique(table["terminal_id"].to_numpy(dtype=object).astype(str), return_inverse=True)
        self.codes = {terminal: i for i, terminal in enumerate(terminals.tolist())}
        keys = self._keys(codes, table["day"].to_numpy(dtype=np.int64))
        order = np.argsort(keys, kind="stable")
        if len(order) and (np.diff(keys[order]) == 0).any():
            raise ValueError("terminal table has more than one row for a (terminal_id, day)")
        self.keys = keys[order]
        self.counts = table[fx.TERMINAL_DAY_COUNTS].to_numpy(dtype=np.float64)[order]
        lengths, self.recent_ms = fx.ragged(table["recent_ms"].iloc[order], np.int64)
        _, self.recent_fraud = fx.ragged(table["recent_fraud"].iloc[order], np.float64)
        self.offsets = np.concatenate(([0], np.cumsum(lengths)))

    @staticmethod
    def _keys(codes: np.ndarray, days: np.ndarray) -> np.ndarray:
        return (codes.astype(np.int64) << _DAY_BITS) | days.astype(np.int64)

    def __len__(self) -> int:
        return len(self.keys)

    def rows(self, terminal_id: pd.Series, day) -> pd.DataFrame:
        """The table's ``TERMINAL_DAY_COUNTS`` and ``TERMINAL_RECENT`` for each (terminal_id, day), aligned
        with ``terminal_id``'s index."""
        codes = np.fromiter((self.codes.get(t, -1) for t in terminal_id.astype(str)), np.int64, len(terminal_id))
        keys = self._keys(np.maximum(codes, 0), np.asarray(day, dtype=np.int64))
        at = np.minimum(np.searchsorted(self.keys, keys), max(len(self.keys) - 1, 0))
        found = (codes >= 0) & (len(self.keys) > 0)
        if len(self.keys):
            found &= self.keys[at] == keys
        counts = np.full((len(keys), len(fx.TERMINAL_DAY_COUNTS)), np.nan)
        counts[found] = self.counts[at[found]]
        out = pd.DataFrame(counts, columns=fx.TERMINAL_DAY_COUNTS, index=terminal_id.index)
        starts, ends = self.offsets[at], self.offsets[at + 1] if len(self.keys) else self.offsets[at]
        out["recent_ms"] = fx.objects([self.recent_ms[s:e] if ok else None
                                       for s, e, ok in zip(starts, ends, found)])
        out["recent_fraud"] = fx.objects([self.recent_fraud[s:e] if ok else None
                                          for s, e, ok in zip(starts, ends, found)])
        return out
