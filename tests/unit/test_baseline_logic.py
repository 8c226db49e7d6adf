"""The baselines' event-time rules when a rebalance takes partitions away (bench/baselines/logic.py)."""

from __future__ import annotations

import json

from bench.baselines.logic import Detection
from tests.builders import encode, txn


def _feed(detection: Detection, out: list, partition: int, value: dict) -> None:
    detection.process(encode(value), value["card_id"].encode(), "t", partition, 0, 0, out)


def _velocity_alerts(out: list) -> list[dict]:
    return [json.loads(v) for kind, _, v in out if kind == "alert" and json.loads(v)["detector"] == "velocity"]


def test_a_partition_moved_away_no_longer_holds_the_watermark_back():
    detection, out = Detection(), []
    _feed(detection, out, 1, txn(0, card="card-other", seconds=0))            # partition 1: read once
    for i in range(5):                                                          # a card-testing burst
        _feed(detection, out, 0, txn(1 + i, card="card-burst", amount=1.0, channel="ecom", seconds=10 * i))
    _feed(detection, out, 0, txn(9, card="card-later", seconds=900))           # partition 0 moves on
    detection.end_batch(out)
    assert _velocity_alerts(out) == []          # held back by partition 1, as it should while it is read

    detection.keep_partitions({0})              # a rebalance gave partition 1 to the other process
    detection.end_batch(out)
    [alert] = _velocity_alerts(out)
    assert alert["card_id"] == "card-burst" and alert["evidence"]["count"] == 5
    assert detection.watermark == detection.max_seen - 120_000
