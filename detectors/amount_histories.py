"""The recent amounts of many cards, packed into one state row of ``applyInPandasWithState``.

``amount_anomaly`` keeps its per-card state in buckets (``pmod(hash(card_id), state_buckets)``) instead of
one state row per card: Spark's Python stateful operators pay 0.5-0.85 ms per *group* per micro-batch
(``docs/architecture.md``, "Spark costs that shaped the design"), which at 100k cards was most of the
job's time. A bucket holds every card of its share as four columns (card ids as a JSON array, and
little-endian bytes for the newest event time, the history length and the concatenated histories of each
card), so a micro-batch costs one group call per touched bucket and one numpy pass over its cards. Pure
Python and numpy: tested without Spark.
"""

from __future__ import annotations

import json

import numpy as np

# Numbers as little-endian bytes, not arrays: PySpark 4.0.0 cannot hand array-typed state back from the JVM
# to Python ("couldn't introspect javabean"), and bytes are compact anyway.
STATE_SCHEMA = "cards string, last_ms binary, lengths binary, amounts binary"


class CardHistories:
    """One bucket's cards: each card's last amounts learnt (oldest first) and its newest event time (ms).

    ``get`` and ``put`` work card by card; ``forget_idle`` drops the cards not seen since a given time
    except those put since decoding (a card with data in this batch keeps its history, as a per-card
    timeout would: Spark calls a key with data before it checks the key's timeout).
    """

    def __init__(self, cards: list[str] | None = None, last_ms: np.ndarray | None = None,
                 lengths: np.ndarray | None = None, amounts: np.ndarray | None = None):
        self._cards = cards or []
        self._last_ms = last_ms if last_ms is not None else np.empty(0, dtype=np.int64)
        self._lengths = lengths if lengths is not None else np.empty(0, dtype=np.int32)
        self._amounts = amounts if amounts is not None else np.empty(0, dtype=np.float64)
        self._offsets = np.concatenate(([0], np.cumsum(self._lengths, dtype=np.int64)))
        self._index = {card: i for i, card in enumerate(self._cards)}
        self._kept = np.ones(len(self._cards), dtype=bool)     # decoded cards neither put nor forgotten
        self._put: dict[str, tuple[np.ndarray, int]] = {}

    @classmethod
    def decode(cls, row: tuple) -> "CardHistories":
        cards, last_ms, lengths, amounts = row
        return cls(json.loads(cards), np.frombuffer(last_ms, dtype="<i8"), np.frombuffer(lengths, dtype="<i4"),
                   np.frombuffer(amounts, dtype="<f8"))

    def encode(self) -> tuple[str, bytes, bytes, bytes]:
        kept = self._kept
        cards = [card for card, keep in zip(self._cards, kept) if keep] + list(self._put)
        put = list(self._put.values())
        last_ms = np.concatenate((self._last_ms[kept], np.fromiter((p[1] for p in put), np.int64, len(put))))
        lengths = np.concatenate((self._lengths[kept], np.fromiter((len(p[0]) for p in put), np.int32, len(put))))
        amounts = np.concatenate((self._amounts[np.repeat(kept, self._lengths)], *(p[0] for p in put)))
        return (json.dumps(cards), last_ms.astype("<i8").tobytes(), lengths.astype("<i4").tobytes(),
                amounts.astype("<f8").tobytes())

    def get(self, card: str) -> tuple[np.ndarray, int | None]:
        """The card's history and newest event time (ms), or an empty history and ``None``."""
        if card in self._put:
            return self._put[card]
        i = self._index.get(card)
        if i is None or not self._kept[i]:
            return np.empty(0), None
        return self._amounts[self._offsets[i]:self._offsets[i + 1]], int(self._last_ms[i])

    def put(self, card: str, history: np.ndarray, last_ms: int) -> None:
        i = self._index.get(card)
        if i is not None:
            self._kept[i] = False
        self._put[card] = (np.asarray(history, dtype=np.float64), int(last_ms))

    def lookup(self, cards: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``get`` for many cards at once: their histories laid end to end, the histories' lengths, the
        newest event times and whether each card is known (unknown: empty history, time 0)."""
        found = [self.get(card) for card in cards]
        known = np.fromiter((last is not None for _, last in found), bool, len(found))
        last_ms = np.fromiter((last or 0 for _, last in found), np.int64, len(found))
        lengths = np.fromiter((len(history) for history, _ in found), np.int64, len(found))
        amounts = np.concatenate([history for history, _ in found]) if found else np.empty(0)
        return amounts.astype(np.float64, copy=False), lengths, last_ms, known

    def put_many(self, cards: list[str], histories: np.ndarray, lengths: np.ndarray, last_ms: np.ndarray) -> None:
        """``put`` for many cards: ``histories`` laid end to end, ``lengths`` long each."""
        ends = np.cumsum(lengths)
        for card, end, length, last in zip(cards, ends.tolist(), lengths.tolist(), last_ms.tolist()):
            self.put(card, histories[end - length:end], last)

    def forget_idle(self, seen_before_ms: int) -> int:
        """Drop the decoded cards whose newest event time is before ``seen_before_ms``; how many went."""
        idle = self._kept & (self._last_ms < seen_before_ms)
        self._kept &= ~idle
        return int(idle.sum())

    def __len__(self) -> int:
        return int(self._kept.sum()) + len(self._put)

    def oldest_last_ms(self) -> int:
        """The oldest newest-event-time of the cards held (the next one to become idle)."""
        times = [int(self._last_ms[self._kept].min())] if self._kept.any() else []
        times += [p[1] for p in self._put.values()]
        return min(times)
