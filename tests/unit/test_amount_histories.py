"""amount_anomaly's bucketed state: many cards in one state row, scored as if each had its own.

Pure Python: ``CardHistories`` and the bucket function run with PySpark's own ``GroupState`` as its
Python worker builds it, micro-batch after micro-batch, the state row passed on as Spark would.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from detectors import amount_anomaly, samples
from detectors.amount_anomaly import AmountAnomalyParams, score_amounts
from common.keyed_histories import KeyedHistories as CardHistories

T0 = datetime(2026, 1, 5, 9, tzinfo=timezone.utc)
PARAMS = AmountAnomalyParams()
TTL_MS = int(PARAMS.history_ttl_hours * 3600 * 1000)


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def frame(txns: list[dict]) -> pd.DataFrame:
    """Transactions as Spark hands them to the bucket function (naive UTC timestamps)."""
    out = pd.DataFrame(txns)
    out["event_time"] = pd.to_datetime(out["event_time"]).dt.tz_convert("UTC").dt.tz_localize(None)
    return out.reindex(columns=amount_anomaly._CARRIED)   # ingested_at: null, as in static runs


def state_after(previous: GroupState | None, watermark_ms: int, timed_out: bool = False) -> GroupState:
    """The state Spark hands to the next call: the previous call's value (if kept) and the new watermark."""
    value = previous._value if previous is not None and previous.exists else None
    return GroupState(optionalValue=value, batchProcessingTimeMs=watermark_ms, eventTimeWatermarkMs=watermark_ms,
                      timeoutConf=GroupStateTimeout.EventTimeTimeout, hasTimedOut=timed_out, watermarkPresent=True,
                      defined=value is not None, updated=False, removed=False, timeoutTimestamp=-1,
                      keyAsUnsafe=b"", valueSchema=None)


def test_histories_survive_encoding_card_by_card():
    histories = CardHistories()
    histories.put("card-é", np.array([1.5, 2.25]), 1_000)
    histories.put("card-b", np.array([]), 2_000)
    histories.put("card-c", np.array([9.0]), 3_000)
    again = CardHistories.decode(histories.encode())
    assert len(again) == 3
    assert again.get("card-é")[0].tolist() == [1.5, 2.25] and again.get("card-é")[1] == 1_000
    assert again.get("card-b")[0].tolist() == [] and again.get("card-b")[1] == 2_000
    assert again.get("missing")[1] is None and again.get("missing")[0].size == 0
    again.put("card-é", np.array([2.25, 4.0]), 5_000)       # replaced, not duplicated
    third = CardHistories.decode(again.encode())
    assert len(third) == 3 and third.get("card-é")[0].tolist() == [2.25, 4.0]
    assert third.get("card-c")[0].tolist() == [9.0] and third.oldest_last_ms() == 2_000


def test_forget_idle_keeps_cards_seen_since_and_cards_put_in_this_call():
    stored = CardHistories()
    for card, last in [("old", 1_000), ("older", 500), ("recent", 9_000)]:
        stored.put(card, np.array([1.0]), last)
    histories = CardHistories.decode(stored.encode())
    histories.put("older", np.array([1.0, 2.0]), 700)       # seen in this batch: kept despite its age
    assert histories.forget_idle(seen_before_ms=5_000) == 1  # only "old" goes
    assert sorted(c for c in ["old", "older", "recent"] if histories.get(c)[1] is not None) == ["older", "recent"]
    assert histories.oldest_last_ms() == 700


def test_a_bucket_scores_each_card_as_if_it_had_its_own_state():
    """Two cards interleaved in one bucket, split over two micro-batches: the same anomalies as
    ``score_amounts`` run card by card over each card's whole sequence."""
    a = samples.amount_spike("card-a", T0, history=12)
    b = samples.amount_spike("card-b", T0 + timedelta(minutes=3), history=14, typical=90.0, spike=900.0)
    batches = [a[:7] + b[:9], a[7:] + b[9:]]
    per_bucket = amount_anomaly._streaming_function(PARAMS)
    state, found = None, []
    for batch in batches:
        state = state_after(state, ms(T0))
        found += [frame for frame in per_bucket((3,), iter([frame(list(reversed(batch)))]), state)]
    alerts = pd.concat(found)
    assert sorted(alerts["txn_id"]) == sorted([a[-1]["txn_id"], b[-1]["txn_id"]])
    for card in (a, b):
        amounts = np.array([t["amount"] for t in card])
        times = np.array([ms(datetime.fromisoformat(t["event_time"])) for t in card])
        [(index, median, mad, robust_z, ratio, count)] = score_amounts(np.empty(0), amounts, PARAMS, times)[0]
        row = alerts[alerts["txn_id"] == card[index]["txn_id"]].iloc[0]
        assert (row["median"], row["mad"], row["robust_z"], row["ratio"]) == (median, mad, robust_z, ratio)
        assert row["history_count"] == count == len(card) - 1


def test_idle_cards_are_forgotten_and_an_empty_bucket_removes_its_state():
    per_bucket = amount_anomaly._streaming_function(PARAMS)
    first = state_after(None, ms(T0))
    list(per_bucket((3,), iter([frame([samples.txn("card-a", T0, 10.0)])]), first))
    later = T0 + timedelta(days=20)
    second = state_after(first, ms(later))
    list(per_bucket((3,), iter([frame([samples.txn("card-b", later, 10.0)])]), second))
    assert second._timeout_timestamp == ms(T0) + TTL_MS, "due when card-a is to be forgotten"
    # The watermark passes card-a's TTL: Spark calls the bucket with no data and hasTimedOut.
    third = state_after(second, ms(T0) + TTL_MS + 1, timed_out=True)
    assert list(per_bucket((3,), iter([]), third)) == []
    held = CardHistories.decode(third.get)
    assert len(held) == 1 and held.get("card-b")[1] == ms(later) and held.get("card-a")[1] is None
    assert third._timeout_timestamp == ms(later) + TTL_MS
    fourth = state_after(third, ms(later) + TTL_MS + 1, timed_out=True)
    list(per_bucket((3,), iter([]), fourth))
    assert not fourth.exists and fourth._removed


def _random_bucket(rng: np.random.Generator):
    """Cards with random histories (some unknown) and 1-6 new transactions each, in event-time order."""
    cards = int(rng.integers(1, 25))
    lengths = rng.integers(0, 12, cards)
    history = np.round(rng.lognormal(3, 0.6, int(lengths.sum())), 2)
    known = rng.random(cards) < 0.8
    previous_ms = np.where(known, rng.integers(0, 10, cards) * 60_000, 0)
    counts = rng.integers(1, 7, cards)
    # gaps of 0-300 s: some below the learning gap; a card's first time may precede its previous one
    # whole minutes half of the time: gaps of exactly the learning gap (120 s) occur
    step = 60_000 if rng.random() < 0.5 else 1
    times = np.concatenate([np.sort(rng.integers(0, 300_000 // step, n)) * step + int(p) - 120_000
                            for n, p in zip(counts, previous_ms)])
    spikes = np.where(rng.random(int(counts.sum())) < 0.15, 12, 1)
    amounts = np.round(rng.lognormal(3, 0.6, int(counts.sum())) * spikes, 2)
    amounts[rng.random(len(amounts)) < 0.05] = 0.0
    return history, lengths, previous_ms, known, counts, times.astype(np.int64), amounts


# min_history=0 lets the specification take the median of an empty history (NaN, never an alert)
@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:invalid value encountered")
def test_scoring_all_cards_at_once_agrees_with_scoring_each_amount():
    """``amount_scoring.score_cards`` (numpy, all cards) gives ``score_amounts``'s numbers to the bit."""
    from detectors.amount_scoring import score_cards

    rng = np.random.default_rng(11)
    alerts = 0
    for case in range(300):
        params = AmountAnomalyParams(history_size=int(rng.integers(1, 9)), min_history=int(rng.integers(0, 5)),
                                     min_robust_z=3.0, min_ratio=2.0, min_amount=float(rng.choice([0.0, 25.0])))
        history, lengths, previous_ms, known, counts, times, amounts = _random_bucket(rng)
        got = score_cards(history, lengths, previous_ms, known, counts, times, amounts, params)
        want_found, want_history, want_lengths, want_last = [], [], [], []
        h_end, t_end = np.cumsum(lengths), np.cumsum(counts)
        for c in range(len(counts)):
            h, t = slice(h_end[c] - lengths[c], h_end[c]), slice(t_end[c] - counts[c], t_end[c])
            prev = int(previous_ms[c]) if known[c] else None
            found, new_history = score_amounts(history[h], amounts[t], params, times[t], prev)
            want_found += [(t.start + i, *stats) for i, *stats in found]
            want_history.append(new_history)
            want_lengths.append(len(new_history))
            newest = int(times[t].max())
            want_last.append(newest if prev is None else max(prev, newest))
        got_found = [(int(i), *map(float, stats[:4]), int(stats[4])) for i, *stats in
                     zip(got.found, got.median, got.mad, got.robust_z, got.ratio, got.history_count)]
        assert got_found == [(i, *map(float, stats[:4]), int(stats[4])) for i, *stats in want_found], case
        assert got.history.tolist() == np.concatenate(want_history).tolist(), case
        assert got.history_lengths.tolist() == want_lengths and got.last_ms.tolist() == want_last, case
        alerts += len(want_found)
    assert alerts > 100          # the cases do exercise the alerting path
