"""``detectors.operators.pairs_within`` (the job jar's keyed pair operator) finds what the stream-stream self-join
it replaced finds: the same pairs on a static DataFrame and on a stream whose rows arrive out of order over
several micro-batches, ties in event time included; rows behind the watermark are dropped and counted, and a
key's state is removed once none of its rows can pair any more."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from detectors import harness
from detectors.base import Detector, alerts
from detectors.operators import pairs_within
from detectors.samples import T0, out_of_order, txn

pytestmark = pytest.mark.integration

GAP_S = 60.0


def _as_alerts(pairs: DataFrame, detector: Detector) -> DataFrame:
    return pairs.select(*alerts(detector, card_id=F.col("later.card_id"),
                                txn_ids=F.array(F.col("earlier.txn_id"), F.col("later.txn_id")),
                                event_time=F.col("later.event_time"), score=F.lit(1.0), reason=F.lit("pair"),
                                evidence={}, trigger="later"))


def _by_operator(transactions: DataFrame, params) -> DataFrame:
    return _as_alerts(pairs_within(transactions, key="card_id", max_gap_seconds=GAP_S, names=("earlier", "later")),
                      BY_OPERATOR)


def _by_self_join(transactions: DataFrame, params) -> DataFrame:
    a, b = transactions.alias("earlier"), transactions.alias("later")
    gap = F.expr(f"INTERVAL {int(GAP_S * 1000)} MILLISECONDS")
    t_a, t_b, id_a, id_b = (F.col("earlier.event_time"), F.col("later.event_time"), F.col("earlier.txn_id"),
                            F.col("later.txn_id"))
    pairs = a.join(b, (F.col("earlier.card_id") == F.col("later.card_id")) & (t_b >= t_a) & (t_b <= t_a + gap)
                   & (id_a != id_b) & ((t_b > t_a) | (id_b > id_a)), "inner")
    return _as_alerts(pairs.select(F.struct("earlier.*").alias("earlier"), F.struct("later.*").alias("later")),
                      BY_SELF_JOIN)


BY_OPERATOR = Detector(name="pairs_by_operator", version="1", description="every pair, by pairs_within",
                       watermark="2 minutes", params=None, detect=_by_operator)
BY_SELF_JOIN = Detector(name="pairs_by_self_join", version="1", description="every pair, by a self-join",
                        watermark="2 minutes", params=None, detect=_by_self_join)


def _traffic(seed: int = 7, count: int = 400) -> list[tuple[int, dict]]:
    """Twelve cards over ten minutes of event time, ties on whole seconds, gaps within and beyond 60 s, every
    third one online (null lat/lon, kept in the operator's packed state): (second of event time, transaction)."""
    rng = random.Random(seed)
    seconds = [rng.randrange(600) for _ in range(count)]
    return [(s, txn(f"card-{rng.randrange(12)}", T0 + timedelta(seconds=s), 10.0, txn_id=f"t{i:04d}",
                    channel="ecom" if i % 3 == 0 else "pos"))
            for i, s in enumerate(seconds)]


def _pairs(found: list[dict]) -> set[tuple[str, ...]]:
    return {tuple(a["txn_ids"]) for a in found}


def test_the_same_pairs_as_the_self_join_statically(spark):
    txns = [t for _, t in _traffic()]
    by_join = _pairs(harness.run_static(BY_SELF_JOIN, txns, spark))
    assert len(by_join) > 500                      # a real workload: many pairs, many outside the gap
    assert _pairs(harness.run_static(BY_OPERATOR, txns, spark)) == by_join


def test_the_same_pairs_as_the_self_join_on_a_stream_arriving_out_of_order(spark, tmp_path):
    traffic = _traffic()
    txns = [t for _, t in traffic]
    # Each row arrives up to 90 s of event time early or late against its neighbours: within the 2-minute
    # watermark, so the join drops nothing either.
    batches = out_of_order(traffic, spread_s=90, per_batch=50, seed=11)
    batches.append([harness.watermark_tick(T0 + timedelta(hours=1))])
    expected = _pairs(harness.run_static(BY_SELF_JOIN, txns, spark))

    joined = harness.run_microbatches(BY_SELF_JOIN, batches, spark, tmp_path / "join")
    paired = harness.run_microbatches(BY_OPERATOR, batches, spark, tmp_path / "operator")
    assert _pairs(joined.alerts) == expected
    assert _pairs(paired.alerts) == expected
    assert len(paired.alerts) == len(expected)                 # each pair once
    assert paired.dropped() == joined.dropped() == 0
    # one state row per card while its rows can pair; an hour on, only the tick's card is left
    assert max(paired.state_rows()) >= 12 and paired.state_rows()[-1] == 1


def test_rows_behind_the_watermark_are_dropped_and_counted(spark, tmp_path):
    first = txn("card-1", T0, 10.0, txn_id="a")
    tick = harness.watermark_tick(T0 + timedelta(minutes=30))
    late = txn("card-1", T0 + timedelta(seconds=20), 10.0, txn_id="b")
    result = harness.run_microbatches(BY_OPERATOR, [[first, tick], [late]], spark, tmp_path / "operator")
    assert result.alerts == []
    assert result.dropped(1) == 1

