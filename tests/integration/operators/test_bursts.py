"""``detectors.operators.bursts`` (the job jar's burst operator) reports every row of a key's long enough bursts
once, as soon as its burst is long enough, as its docstring specifies: statically, and on a stream whose rows arrive out of
order over several micro-batches (bursts kept across batches, merged by a row that bridges them, forgotten
once the watermark passes them); rows behind the watermark are dropped and counted."""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import timedelta

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from common.contracts import parse_event_time
from detectors import harness
from detectors.base import Detector, alerts
from detectors.operators import bursts
from detectors.samples import T0, out_of_order, txn

pytestmark = pytest.mark.integration

MIN_COUNT, GAP_S = 4, 30.0


def _bursts(transactions: DataFrame, params) -> DataFrame:
    found = bursts(transactions, key="card_id", min_count=MIN_COUNT, max_gap_seconds=GAP_S, value="amount")
    # One "alert" per report; its reason carries the reporting row and the burst: "id|count|total|first|last".
    reason = F.concat_ws("|", F.col("txn_id"), F.col("burst_count").cast("string"), F.format_number(F.col("burst_total"), 2),
                         F.col("burst_first_ms").cast("string"), F.col("burst_last_ms").cast("string"))
    return found.select(*alerts(BURSTS, card_id=F.col("card_id"), txn_ids=F.col("burst_ids"),
                                event_time=F.col("event_time"), score=F.lit(1.0), reason=reason, evidence={}))


BURSTS = Detector(name="bursts", version="1", description="each burst once", watermark="2 minutes",
                  params=None, detect=_bursts)


def _ms(record: dict) -> int:
    return int(parse_event_time(record["event_time"]).timestamp() * 1000)


def expected(batches: list[list[dict]]) -> dict[str, tuple[list[str], str]]:
    """The specification, batch by batch: each key's rows by (time, id); a row joins (merging) every open
    burst it is less than the gap from; once that has MIN_COUNT rows, the row reports the burst's rows not
    reported yet. Reporting row's id -> (the ids it reports by time then id, "count|total|first|last")."""
    gap = GAP_S * 1000
    open_: dict[str, list[list]] = defaultdict(list)     # key -> [first, last, count, total, unreported [(t, id)]]
    out = {}
    for batch in batches:
        by_key = defaultdict(list)
        for record in batch:
            by_key[record["card_id"]].append(record)
        for key, rows in by_key.items():
            for record in sorted(rows, key=lambda r: (_ms(r), r["txn_id"])):
                t = _ms(record)
                joined = [t, t, 1, float(record["amount"]), [(t, record["txn_id"])]]
                rest = []
                for b in open_[key]:
                    if b[0] - gap < t < b[1] + gap:
                        joined = [min(joined[0], b[0]), max(joined[1], b[1]), joined[2] + b[2], joined[3] + b[3],
                                  joined[4] + b[4]]
                    else:
                        rest.append(b)
                if joined[2] >= MIN_COUNT:
                    out[record["txn_id"]] = ([i for _, i in sorted(joined[4])],
                                             f"{joined[2]}|{joined[3]:,.2f}|{joined[0]}|{joined[1]}")
                    joined[4] = []
                open_[key] = rest + [joined]
    return out


def got(found: list[dict]) -> dict[str, tuple[list[str], str]]:
    return {a["reason"].split("|", 1)[0]: (a["txn_ids"], a["reason"].split("|", 1)[1]) for a in found}


def _traffic(seed: int = 5, count: int = 300) -> list[tuple[float, dict]]:
    """Eight cards over twenty minutes of event time, gaps within and beyond the burst gap, ties on whole
    seconds: (second of event time, transaction)."""
    rng = random.Random(seed)
    seconds = [rng.randrange(1200) for _ in range(count)]
    return [(s, txn(f"card-{rng.randrange(8)}", T0 + timedelta(seconds=s), round(rng.uniform(0.5, 5), 2),
                    txn_id=f"t{i:04d}"))
            for i, s in enumerate(seconds)]


def test_every_row_of_a_long_burst_is_reported_once_statically(spark):
    txns = [t for _, t in _traffic()]
    want = expected([txns])
    reported = [i for ids, _ in want.values() for i in ids]
    assert len(reported) == len(set(reported)) and any(len(ids) >= MIN_COUNT for ids, _ in want.values())
    assert any(len(ids) == 1 for ids, _ in want.values())
    assert got(harness.run_static(BURSTS, txns, spark)) == want


def test_bursts_on_a_stream_arriving_out_of_order(spark, tmp_path):
    traffic = _traffic()
    # Each row arrives up to 40 s of event time early or late against its neighbours: within the watermark.
    batches = out_of_order(traffic, spread_s=40, per_batch=40, seed=3)
    want = expected(batches)
    assert want != expected([[t for _, t in traffic]])     # arrival order matters: the case is exercised
    batches.append([harness.watermark_tick(T0 + timedelta(hours=3))])

    result = harness.run_microbatches(BURSTS, batches, spark, tmp_path / "bursts")
    assert got(result.alerts) == want
    assert result.dropped() == 0
    # bursts are forgotten once the watermark passes them: only the tick's card is left
    assert max(result.state_rows()) >= 4 and result.state_rows()[-1] == 1


def test_a_late_row_bridging_two_short_bursts_reports_the_merged_one(spark, tmp_path):
    def at(s, i):
        return txn("card-1", T0 + timedelta(seconds=s), 1.0, txn_id=i)

    left, right, bridge = [at(0, "a"), at(25, "b")], [at(75, "d"), at(95, "e")], at(50, "c")
    result = harness.run_microbatches(BURSTS, [left + right, [bridge], [at(120, "f")]], spark, tmp_path / "b")
    # a..e are one burst once c came: c reports them all, the later row f itself
    assert [(a["txn_ids"], a["reason"].split("|")[:2]) for a in result.alerts] == [
        (["a", "b", "c", "d", "e"], ["c", "5"]), (["f"], ["f", "6"])]


def test_rows_behind_the_watermark_are_dropped_and_counted(spark, tmp_path):
    first = [txn("card-1", T0 + timedelta(seconds=s), 1.0, txn_id=f"a{s}") for s in (0, 10, 20)]
    tick = harness.watermark_tick(T0 + timedelta(minutes=30))
    late = txn("card-1", T0 + timedelta(seconds=30), 1.0, txn_id="b")
    result = harness.run_microbatches(BURSTS, [first + [tick], [late]], spark, tmp_path / "bursts")
    assert result.alerts == []
    assert result.dropped(1) == 1
