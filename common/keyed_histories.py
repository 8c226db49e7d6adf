"""The recent values of many keys, packed into one state row of ``applyInPandasWithState``.

Spark's Python stateful operators pay per *group* per micro-batch (docs/architecture.md, "Spark costs
that shaped the design"), so a detector with state per card or customer keeps it in buckets
(``pmod(hash(key), buckets)``) instead: a bucket's row holds every key of its share as four columns
(keys as a JSON array, and little-endian bytes for each key's newest event time, its history's length
and the concatenated histories), so a micro-batch costs one group call per touched bucket and numpy
passes over its keys. ``amount_anomaly`` keeps each card's last amounts here, ``ml_score``'s features
each customer's (time, amount) pairs. Pure Python and numpy: tested without Spark.
"""

from __future__ import annotations

import json

import numpy as np

# Numbers as little-endian bytes, not arrays: PySpark 4.0.0 cannot hand array-typed state back from the JVM
# to Python ("couldn't introspect javabean"), and bytes are compact anyway.
# Column names as amount_anomaly first wrote them (its checkpoints hold them): "cards" are the keys,
# "amounts" the values.
STATE_SCHEMA = "cards string, last_ms binary, lengths binary, amounts binary"


class KeyedHistories:
    """One bucket's keys: each key's history (float64 values, oldest first) and its newest event time (ms).

    ``get`` and ``put`` work key by key; ``forget_idle`` drops the keys not seen since a given time
    except those put since decoding (a key with data in this batch keeps its history, as a per-key
    timeout would: Spark calls a key with data before it checks the key's timeout).
    """

    def __init__(self, keys: list[str] | None = None, last_ms: np.ndarray | None = None,
                 lengths: np.ndarray | None = None, values: np.ndarray | None = None):
        self._keys = keys or []
        self._last_ms = last_ms if last_ms is not None else np.empty(0, dtype=np.int64)
        self._lengths = lengths if lengths is not None else np.empty(0, dtype=np.int32)
        self._values = values if values is not None else np.empty(0, dtype=np.float64)
        self._offsets = np.concatenate(([0], np.cumsum(self._lengths, dtype=np.int64)))
        self._index = {key: i for i, key in enumerate(self._keys)}
        self._kept = np.ones(len(self._keys), dtype=bool)     # decoded keys neither put nor forgotten
        self._put: dict[str, tuple[np.ndarray, int]] = {}

    @classmethod
    def decode(cls, row: tuple) -> "KeyedHistories":
        keys, last_ms, lengths, values = row
        return cls(json.loads(keys), np.frombuffer(last_ms, dtype="<i8"), np.frombuffer(lengths, dtype="<i4"),
                   np.frombuffer(values, dtype="<f8"))

    def encode(self) -> tuple[str, bytes, bytes, bytes]:
        kept = self._kept
        keys = [key for key, keep in zip(self._keys, kept) if keep] + list(self._put)
        put = list(self._put.values())
        last_ms = np.concatenate((self._last_ms[kept], np.fromiter((p[1] for p in put), np.int64, len(put))))
        lengths = np.concatenate((self._lengths[kept], np.fromiter((len(p[0]) for p in put), np.int32, len(put))))
        amounts = np.concatenate((self._values[np.repeat(kept, self._lengths)], *(p[0] for p in put)))
        return (json.dumps(keys), last_ms.astype("<i8").tobytes(), lengths.astype("<i4").tobytes(),
                amounts.astype("<f8").tobytes())

    def get(self, key: str) -> tuple[np.ndarray, int | None]:
        """The key's history and newest event time (ms), or an empty history and ``None``."""
        if key in self._put:
            return self._put[key]
        i = self._index.get(key)
        if i is None or not self._kept[i]:
            return np.empty(0), None
        return self._values[self._offsets[i]:self._offsets[i + 1]], int(self._last_ms[i])

    def put(self, key: str, history: np.ndarray, last_ms: int) -> None:
        i = self._index.get(key)
        if i is not None:
            self._kept[i] = False
        self._put[key] = (np.asarray(history, dtype=np.float64), int(last_ms))

    def lookup(self, keys: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``get`` for many keys at once: their histories laid end to end, the histories' lengths, the
        newest event times and whether each key is known (unknown: empty history, time 0)."""
        found = [self.get(key) for key in keys]
        known = np.fromiter((last is not None for _, last in found), bool, len(found))
        last_ms = np.fromiter((last or 0 for _, last in found), np.int64, len(found))
        lengths = np.fromiter((len(history) for history, _ in found), np.int64, len(found))
        amounts = np.concatenate([history for history, _ in found]) if found else np.empty(0)
        return amounts.astype(np.float64, copy=False), lengths, last_ms, known

    def put_many(self, keys: list[str], histories: np.ndarray, lengths: np.ndarray, last_ms: np.ndarray) -> None:
        """``put`` for many keys: ``histories`` laid end to end, ``lengths`` long each."""
        ends = np.cumsum(lengths)
        for key, end, length, last in zip(keys, ends.tolist(), lengths.tolist(), last_ms.tolist()):
            self.put(key, histories[end - length:end], last)

    def forget_idle(self, seen_before_ms: int) -> int:
        """Drop the decoded keys whose newest event time is before ``seen_before_ms``; how many went."""
        idle = self._kept & (self._last_ms < seen_before_ms)
        self._kept &= ~idle
        return int(idle.sum())

    def __len__(self) -> int:
        return int(self._kept.sum()) + len(self._put)

    def oldest_last_ms(self) -> int:
        """The oldest newest-event-time of the keys held (the next one to become idle)."""
        times = [int(self._last_ms[self._kept].min())] if self._kept.any() else []
        times += [p[1] for p in self._put.values()]
        return min(times)
