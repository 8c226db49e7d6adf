"""The built-in detectors, one situation at a time: each fires on its pattern, stays silent on the
look-alikes, and drops (and counts) events behind the watermark. Static runs unless the watermark is the
point; explicit event times everywhere."""

from __future__ import annotations

from datetime import timedelta

import pytest

from detectors import harness, registry, samples
from detectors.samples import LONDON, NEW_YORK, PARIS, T0, txn
from tests.detectors_for_tests import BUILT_IN

MIN = timedelta(minutes=1)


def static(spark, name, txns, **params):
    detector = registry.get(name)
    return harness.run_static(detector.with_params(**params) if params else detector, txns, spark)


# --- fires on its own pattern --------------------------------------------------------------------

def test_double_swipe_names_both_swipes_and_the_gap(spark):
    txns = samples.double_swipe("c1", T0, gap_s=12.5)
    [alert] = static(spark, "double_swipe", txns)
    assert alert["txn_ids"] == [txns[0]["txn_id"], txns[1]["txn_id"]]
    assert alert["event_time"] == txns[1]["event_time"]
    assert alert["evidence"]["gap_seconds"] == pytest.approx(12.5)
    assert "12.5 s apart" in alert["reason"]


def test_double_swipe_three_swipes_and_ties(spark):
    three = samples.double_swipe("c1", T0) + [txn("c1", T0 + timedelta(seconds=30), 42.50, merchant_id="m-cafe")]
    assert len(static(spark, "double_swipe", three)) == 3
    same_instant = [txn("c2", T0, 9.99, merchant_id="m", txn_id="b"), txn("c2", T0, 9.99, merchant_id="m", txn_id="a")]
    [alert] = static(spark, "double_swipe", same_instant)
    assert alert["txn_ids"] == ["a", "b"]


def test_velocity_reports_a_burst_from_its_fifth_charge_on(spark):
    burst = samples.card_testing("c1", T0, count=9, every_s=20)
    first, *later = sorted(static(spark, "velocity", list(reversed(burst))), key=lambda a: a["evidence"]["count"])
    fifth = burst[4]
    assert first["txn_ids"] == [t["txn_id"] for t in burst[:5]]
    assert (first["merchant_id"], first["amount"]) == (fifth["merchant_id"], fifth["amount"])
    assert first["event_time"] == fifth["event_time"]
    assert first["evidence"]["count"] == 5 and first["score"] == pytest.approx(0.5)
    assert first["evidence"]["span_seconds"] == pytest.approx(80)
    assert first["evidence"]["total_amount"] == pytest.approx(sum(t["amount"] for t in burst[:5]))
    # each later charge reports itself, with the burst so far
    assert [(a["txn_ids"], a["evidence"]["count"]) for a in later] == [([t["txn_id"]], 6 + i)
                                                                       for i, t in enumerate(burst[5:])]
    assert later[-1]["evidence"]["span_seconds"] == pytest.approx(160)


def test_amount_anomaly_fires_on_a_spike_after_enough_history(spark):
    txns = samples.amount_spike("c1", T0, history=10)
    [alert] = static(spark, "amount_anomaly", txns)
    assert alert["txn_ids"] == [txns[-1]["txn_id"]]
    assert (alert["merchant_id"], alert["amount"], alert["channel"]) == ("m-jeweller", 480.0, "pos")
    assert alert["evidence"]["history_count"] == 10
    assert alert["evidence"]["ratio"] > 8


def test_impossible_travel_evidence(spark):
    txns = samples.impossible_travel("c1", T0, hours=1.0)
    [alert] = static(spark, "impossible_travel", txns)
    assert alert["txn_ids"] == [t["txn_id"] for t in txns]
    assert (alert["merchant_id"], alert["terminal_id"], alert["lat"], alert["lon"]) == \
        ("m-nyc", "term-m-nyc", *NEW_YORK)
    assert alert["evidence"]["km"] == pytest.approx(5837, rel=0.01)
    assert alert["evidence"]["hours"] == pytest.approx(1.0)
    assert alert["evidence"]["kmh"] == pytest.approx(5837, rel=0.01)


# --- silent on the look-alikes --------------------------------------------------------------------

LOOK_ALIKES = (samples.same_merchant_other_amount("la1", T0)
               + samples.same_amount_later("la2", T0, minutes=15)
               + samples.same_amount_later("la3", T0, minutes=60)
               + samples.plausible_trip("la4", T0)
               + samples.few_small_online("la5", T0)
               + samples.ordinary_day("la6", T0, count=8)
               + [txn("la7", T0, 30.0, where=PARIS), txn("la7", T0 + timedelta(minutes=30), 30.0, where=LONDON)]
               + samples.amount_spike("la8", T0, history=8))          # a spike, but too little history


@pytest.mark.parametrize("name", BUILT_IN)
def test_silent_on_look_alikes(spark, name):
    assert static(spark, name, LOOK_ALIKES) == []


def test_amount_anomaly_constant_amount_card_is_not_noisy(spark):
    history = [txn("c1", T0 + i * 10 * MIN, 9.99) for i in range(15)]
    assert static(spark, "amount_anomaly", history + [txn("c1", T0 + 200 * MIN, 14.99)]) == []


def test_amount_anomaly_card_testing_does_not_become_the_history(spark):
    # A young card: three ordinary purchases, then a card-testing burst of nine charges seconds apart,
    # then the holder's ordinary purchase. Learnt as twelve amounts, the burst would make 48.00 a 20x spike.
    history = [txn("c1", T0 + i * 60 * MIN, amount) for i, amount in enumerate([41.0, 52.5, 38.9])]
    burst = samples.card_testing("c1", T0 + 300 * MIN, count=9, every_s=20)
    purchase = txn("c1", T0 + 400 * MIN, 48.0)
    assert static(spark, "amount_anomaly", history + burst + [purchase]) == []
    assert static(spark, "amount_anomaly", history + burst + [purchase], history_min_gap_seconds=0) != []


def test_impossible_travel_needs_card_present_locations(spark):
    online = [txn("c1", T0, 20.0, where=PARIS), txn("c1", T0 + 30 * MIN, 20.0, channel="ecom", where=NEW_YORK)]
    assert static(spark, "impossible_travel", online) == []


def test_params_change_behaviour(spark):
    slow = samples.card_testing("c1", T0, count=4, every_s=30)
    assert static(spark, "velocity", slow) == []
    assert len(static(spark, "velocity", slow, min_count=4)) == 1


# --- late events behind the watermark are dropped and counted --------------------------------------

def _late_case(name):
    """(batch establishing event time, batch whose rows are behind the watermark) for each detector."""
    if name == "double_swipe":
        first, second = samples.double_swipe("c1", T0)
        return [first, harness.watermark_tick(T0 + 30 * MIN)], [second]
    if name == "velocity":
        burst = samples.card_testing("c1", T0, count=7)
        return burst[:2] + [harness.watermark_tick(T0 + 60 * MIN)], burst[2:]
    if name == "amount_anomaly":
        txns = samples.amount_spike("c1", T0, history=12)
        return txns[:-1] + [harness.watermark_tick(T0 + 180 * MIN)], txns[-1:]
    if name == "impossible_travel":
        paris, new_york = samples.impossible_travel("c1", T0, hours=1.0)
        return [paris, harness.watermark_tick(T0 + 180 * MIN)], [new_york]
    raise AssertionError(name)


@pytest.mark.parametrize("name", BUILT_IN)
def test_late_events_are_dropped_and_counted(spark, tmp_path, name):
    detector = registry.get(name)
    on_time, late = _late_case(name)
    # On time, the same rows make the detector fire ...
    assert static(spark, name, on_time + late), "the pattern itself must alert"
    # ... behind the watermark they are dropped, counted, and nothing fires.
    result = harness.run_microbatches(detector, [on_time, late, [harness.watermark_tick(T0 + timedelta(days=2))]],
                                      spark, tmp_path / "checkpoint")
    assert result.alerts == []
    assert result.dropped(1) >= len(late) and result.dropped(0) == 0
