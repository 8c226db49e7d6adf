"""The baselines' event-time rules when a rebalance takes partitions away (bench/baselines/logic.py)."""

from __future__ import annotations

import json

from bench.baselines.logic import Detection
from tests.builders import encode, txn


def _feed(detection: Detection, out: list, partition: int, value: dict) -> None:
    detection.process(encode(value), value["card_id"].encode(), "t", partition, 0, 0, out)


def _velocity_alerts(out: list) -> list[dict]:
    return [json.loads(v) for kind, _, v in out if kind == "alert" and json.loads(v)["detector"] == "velocity"]


def test_a_burst_is_reported_from_its_fifth_charge_on_without_waiting_for_the_watermark():
    detection, out = Detection(), []
    for i in range(7):
        _feed(detection, out, 0, txn(1 + i, card="card-burst", amount=1.0, channel="ecom", seconds=10 * i))
        assert len(_velocity_alerts(out)) == max(0, i - 3)
    fifth, sixth, seventh = _velocity_alerts(out)
    assert fifth["txn_ids"] == [txn(1 + i)["txn_id"] for i in range(5)] and fifth["evidence"]["count"] == 5
    assert fifth["event_time"] == txn(5, seconds=40)["event_time"] and fifth["evidence"]["span_seconds"] == 40
    assert (sixth["txn_ids"], sixth["evidence"]["count"]) == ([txn(6)["txn_id"]], 6)
    assert (seventh["txn_ids"], seventh["score"]) == ([txn(7)["txn_id"]], 0.875)


def test_a_partition_moved_away_no_longer_holds_the_watermark_back():
    detection, out = Detection(), []
    _feed(detection, out, 1, txn(0, card="card-other", seconds=0))            # partition 1: read once
    for i in range(5):                                                          # a card-testing burst
        _feed(detection, out, 0, txn(1 + i, card="card-burst", amount=1.0, channel="ecom", seconds=10 * i))
    _feed(detection, out, 0, txn(9, card="card-later", seconds=900))           # partition 0 moves on
    detection.end_batch(out)
    held, held_at = detection.state_rows(), detection.watermark   # partition 1's time, as it should while read

    detection.keep_partitions({0})              # a rebalance gave partition 1 to the other process
    detection.end_batch(out)
    assert detection.watermark == detection.max_seen - 120_000 == held_at + 900_000
    assert detection.state_rows() < held        # the burst and the old swipes are evicted
