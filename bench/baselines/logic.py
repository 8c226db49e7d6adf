"""double_swipe + velocity in plain Python dictionaries: the baselines' detection logic.

The same alerts as ``detectors/double_swipe.py`` and ``detectors/velocity.py`` (same parameters, same
``alert_id``, ``txn_ids`` order, ``event_time``, score, reason, evidence and trigger context), with the
same event-time rules as Spark's micro-batches:

* every record is decoded and validated by the contract's own ``common.contracts.decode_transaction``
  (the specification the Spark parser is tested against); an invalid record becomes a dead-letter
  record with the reason, the original bytes (base64) and topic/partition/offset, as in ``spark_job/dead_letters.py``;
* the watermark is ``event time - 2 minutes``, advanced after each batch of records (a poll, Spark's
  micro-batch); a record behind the watermark of the previous batch is dropped and counted. Event time
  is the *minimum over the partitions read so far of each partition's maximum* (the usual per-partition
  watermark of Kafka consumers, Flink's rule), where Spark takes the maximum over all rows: a Kafka
  consumer does not read partitions in step (Spark's micro-batches split ``maxOffsetsPerTrigger``
  across partitions), so a global maximum would call most of a pre-loaded topic late;
* double_swipe: each card keeps its transactions while ``event_time + 60 s >= watermark`` (they can
  still pair); a new transaction pairs with every kept one of the same merchant and amount within 60 s
  either side, oldest first, ties by txn_id: the ordered pairs of ``detectors.operators.pairs_within``;
* velocity: small (<= 5.00) e-commerce charges of a card form bursts with a 180 s gap (a charge joins
  every burst it is less than the gap from, merging them, as ``detectors.operators.bursts`` does); once a burst
  has 5 charges, each charge reports the burst's charges not reported yet (the fifth the first five, each
  later one itself); a burst is dropped when the watermark reaches its end (last charge + gap).

State is bounded by event time: a FIFO of (event time, card) evicts double-swipe entries, a heap of
burst ends drops bursts. Known differences from Spark: the watermark rule above, per process
(two consumer processes each see their own partitions), and one "batch" is one ``poll()`` (up to
``max_poll_records``) rather than a micro-batch sized by ``maxOffsetsPerTrigger``, whose rows Spark takes
per card in event-time order (here: arrival order).
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
from collections import deque
from datetime import datetime, timezone

from common.contracts import (ALERT_TRIGGER_FIELDS as TRIGGER_FIELDS, MAX_VALUE_BYTES, ContractError, alert_id,
                              decode_transaction)

WATERMARK_MS = 120_000
DS_GAP_MS = 60_000
VEL_GAP_MS = 180_000
VEL_MAX_AMOUNT = 5.00
VEL_MIN_COUNT = 5
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _ms(text: str) -> int:
    # "2026-01-05T10:15:30.123Z": decode_transaction has already checked the format and the date
    dt = datetime(int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), int(text[14:16]),
                  int(text[17:19]), int(text[20:23]) * 1000, tzinfo=timezone.utc)
    return int((dt - _EPOCH).total_seconds() * 1000)


def _iso(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


class Detection:
    def __init__(self):
        self.watermark = -(1 << 62)
        self.max_seen = -(1 << 62)
        self.partition_max: dict[int, int] = {}
        # card -> (ms, txn, merchant, amount, currency, trigger context)
        self.cards: dict[str, list[tuple[int, str, str, float, str, dict]]] = {}
        self.fifo: deque[tuple[int, str]] = deque()
        # card -> [[start, end (last charge + gap), unreported charges[(ms, txn)], total, currency, count]]
        self.sessions: dict[str, list[list]] = {}
        self.ends: list[tuple[int, str]] = []
        self.counts = {"records": 0, "invalid": 0, "late_dropped": 0, "double_swipe": 0, "velocity": 0}

    # -- one record --------------------------------------------------------------------------------
    def process(self, raw: bytes, key, topic: str, partition: int, offset: int, timestamp_ms: int,
                out: list) -> None:
        """Decode, validate and detect; append ``(topic_kind, key, value_json)`` outputs to ``out``."""
        self.counts["records"] += 1
        try:
            txn = decode_transaction(raw, key=key)
        except ContractError as error:
            self.counts["invalid"] += 1
            out.append(("dlq", key, dead_letter(str(error), raw, key, topic, partition, offset, timestamp_ms)))
            return
        t = _ms(txn["event_time"])
        if t < self.watermark:
            self.counts["late_dropped"] += 1
            return
        if t > self.partition_max.get(partition, -(1 << 62)):
            self.partition_max[partition] = t
        card, txn_id, merchant, amount, currency = (txn["card_id"], txn["txn_id"], txn["merchant_id"],
                                                    txn["amount"], txn["currency"])
        trigger = {name: txn.get(name) for name in TRIGGER_FIELDS}
        # double_swipe: pair with every kept transaction of the card, same merchant and amount, <= 60 s apart
        kept = self.cards.get(card)
        if kept is None:
            kept = self.cards[card] = []
        for (t0, id0, m0, a0, _c0, trigger0) in kept:
            if m0 == merchant and a0 == amount and abs(t - t0) <= DS_GAP_MS and id0 != txn_id:
                first, second = (((t0, id0), (t, txn_id, trigger)) if (t0, id0) < (t, txn_id)
                                 else ((t, txn_id), (t0, id0, trigger0)))
                out.append(("alert", card, double_swipe_alert(card, first, second, amount, currency)))
                self.counts["double_swipe"] += 1
        kept.append((t, txn_id, merchant, amount, currency, trigger))
        self.fifo.append((t, card))
        # velocity: small e-commerce charges into bursts, reported by the charge that makes one 5 long
        if amount <= VEL_MAX_AMOUNT and txn["channel"] == "ecom":
            sessions = self.sessions.setdefault(card, [])
            merged = [t, t + VEL_GAP_MS, [(t, txn_id)], amount, currency, 1]
            rest = []
            for s in sessions:
                if t < s[1] and t + VEL_GAP_MS > s[0]:
                    merged[0], merged[1] = min(merged[0], s[0]), max(merged[1], s[1])
                    merged[2].extend(s[2])
                    merged[3] += s[3]
                    merged[5] += s[5]
                else:
                    rest.append(s)
            if merged[5] >= VEL_MIN_COUNT:
                out.append(("alert", card, velocity_alert(card, merged, t, trigger)))
                self.counts["velocity"] += 1
                merged[2] = []
            rest.append(merged)
            self.sessions[card] = rest
            heapq.heappush(self.ends, (merged[1], card))

    def keep_partitions(self, assigned: set[int]) -> None:
        """Forget the event time of partitions this process no longer reads (a rebalance moved them).

        The watermark is the minimum over the partitions' maxima: a partition nobody here advances any
        more would hold it back for good, so velocity sessions would never close and double-swipe state
        never be evicted (the two-process baseline lost half its velocity alerts that way)."""
        for partition in [p for p in self.partition_max if p not in assigned]:
            del self.partition_max[partition]

    # -- end of a batch ------------------------------------------------------------------------------
    def end_batch(self, out: list) -> None:
        """Advance the watermark, evict what can no longer match."""
        if not self.partition_max:
            return
        self.max_seen = min(self.partition_max.values())
        if self.max_seen - WATERMARK_MS <= self.watermark:
            return
        wm = self.watermark = self.max_seen - WATERMARK_MS
        ends, sessions = self.ends, self.sessions
        while ends and ends[0][0] <= wm:
            _, card = heapq.heappop(ends)
            open_ = sessions.get(card)
            if not open_:
                continue
            still = [s for s in open_ if s[1] > wm]
            if still:
                sessions[card] = still
            else:
                del sessions[card]
        fifo, cards = self.fifo, self.cards
        while fifo and fifo[0][0] + DS_GAP_MS < wm:
            _, card = fifo.popleft()
            kept = cards.get(card)
            if kept is None:
                continue
            kept = [e for e in kept if e[0] + DS_GAP_MS >= wm]
            if kept:
                cards[card] = kept
            else:
                del cards[card]

    def state_rows(self) -> int:
        return len(self.fifo) + sum(1 + len(s[2]) for v in self.sessions.values() for s in v)


def double_swipe_alert(card: str, first: tuple[int, str], second: tuple[int, str, dict], amount: float,
                       currency: str) -> str:
    gap = (second[0] - first[0]) / 1000
    ids = [first[1], second[1]]
    return json.dumps({
        "alert_id": alert_id("double_swipe", ids), "detector": "double_swipe", "detector_version": "2.0.0",
        "card_id": card, "txn_ids": ids, "event_time": _iso(second[0]),
        "score": min(max(1.0 - 0.5 * gap / 60.0, 0.0), 1.0),
        "reason": f"same card, merchant and amount ({amount:.2f} {currency}) {gap:.1f} s apart",
        "evidence": {"gap_seconds": gap, "amount": float(amount)},
        **second[2], "detected_at": _iso(_now_ms()),
    }, separators=(",", ":"))


def velocity_alert(card: str, s: list, t: int, trigger: dict) -> str:
    """The burst ``s``'s unreported charges, reported by the charge at ``t`` with context ``trigger``."""
    ids = [c[1] for c in sorted(s[2])]
    count, span = s[5], (s[1] - VEL_GAP_MS - s[0]) / 1000
    return json.dumps({
        "alert_id": alert_id("velocity", ids), "detector": "velocity", "detector_version": "2.0.0",
        "card_id": card, "txn_ids": ids, "event_time": _iso(t),
        "score": 1.0 - 0.5 ** (count - VEL_MIN_COUNT + 1),
        "reason": f"{count} small online charges (total {s[3]:.2f} {s[4]}) on one card within {span:.0f} s",
        "evidence": {"count": float(count), "total_amount": float(s[3]), "span_seconds": span},
        **trigger, "detected_at": _iso(_now_ms()),
    }, separators=(",", ":"))


def dead_letter(reason: str, raw: bytes | None, key, topic: str, partition: int, offset: int,
                timestamp_ms: int) -> str:
    raw = raw or b""
    key_bytes = key if isinstance(key, bytes) else (key or "").encode()
    return json.dumps({
        "reason": reason, "source_topic": topic, "source_partition": partition, "source_offset": offset,
        "source_timestamp": _iso(timestamp_ms), "key_base64": base64.b64encode(key_bytes).decode(),
        "value_base64": base64.b64encode(raw[:MAX_VALUE_BYTES]).decode(), "value_size": len(raw),
        "value_truncated": len(raw) > MAX_VALUE_BYTES, "value_sha256": hashlib.sha256(raw).hexdigest(),
        "dead_lettered_at": _iso(_now_ms()),
    })


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)
