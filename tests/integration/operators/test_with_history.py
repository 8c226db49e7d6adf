"""``detectors.operators.with_history`` (the job jar's keyed history operator) hands every row over with the
history its docstring specifies: statically, and on a stream whose rows arrive out of order over several
micro-batches (history kept across batches in arrival order, a burst learnt once, the oldest entries
dropped by count and by age); rows behind the watermark are dropped and counted, and an idle key's state
is removed."""

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
from detectors.operators import with_history
from detectors.samples import T0, out_of_order, txn

pytestmark = pytest.mark.integration

MAX_ENTRIES, MIN_GAP_S, KEEP_S, IDLE_S = 6, 20.0, 240.0, 3600.0


def _histories(transactions: DataFrame, params) -> DataFrame:
    rows = with_history(transactions, key="card_id", value="amount", max_entries=MAX_ENTRIES,
                        min_gap_seconds=MIN_GAP_S, keep_seconds=KEEP_S, idle_seconds=IDLE_S)
    # One "alert" per row; its reason carries the history: "t1,t2,...|v1,v2,...".
    reason = F.concat_ws("|", F.array_join(F.col("history_ms").cast("array<string>"), ","),
                         F.array_join(F.col("history_values").cast("array<string>"), ","))
    return rows.select(*alerts(HISTORY, card_id=F.col("card_id"), txn_ids=F.array(F.col("txn_id")),
                               event_time=F.col("event_time"), score=F.lit(1.0), reason=reason, evidence={}))


HISTORY = Detector(name="history", version="1", description="every row with its history",
                   watermark="2 minutes", params=None, detect=_histories)


def _ms(record: dict) -> int:
    return int(parse_event_time(record["event_time"]).timestamp() * 1000)


def expected(batches: list[list[dict]]) -> dict[str, tuple[list[int], list[float]]]:
    """The specification, batch by batch: each key's rows by (time, id), each emitted with the entries
    learnt before it, learnt unless within the gap of the key's newest time; at most MAX_ENTRIES kept;
    at the batch's end, entries KEEP_S or more older than the key's newest forgotten."""
    newest: dict[str, int] = {}
    learnt: dict[str, list[tuple[int, float]]] = defaultdict(list)
    out = {}
    for batch in batches:
        by_key = defaultdict(list)
        for record in batch:
            by_key[record["card_id"]].append(record)
        for key, rows in by_key.items():
            for record in sorted(rows, key=lambda r: (_ms(r), r["txn_id"])):
                entries = learnt[key]
                out[record["txn_id"]] = ([t for t, _ in entries], [v for _, v in entries])
                t = _ms(record)
                if key not in newest or abs(t - newest[key]) >= MIN_GAP_S * 1000:
                    entries.append((t, float(record["amount"])))
                    del entries[:-MAX_ENTRIES]
                newest[key] = max(newest.get(key, t), t)
            learnt[key] = [(t, v) for t, v in learnt[key] if t > newest[key] - KEEP_S * 1000]
    return out


def got(found: list[dict]) -> dict[str, tuple[list[int], list[float]]]:
    def parse(part: str, kind):
        return [kind(x) for x in part.split(",")] if part else []

    out = {}
    for alert in found:
        times, values = alert["reason"].split("|")
        out[alert["txn_ids"][0]] = (parse(times, int), parse(values, float))
    return out


def _traffic(seed: int = 7, count: int = 400) -> list[tuple[int, dict]]:
    """Ten cards over fifteen minutes of event time, ties on whole seconds, gaps within and beyond the
    learning gap: (second of event time, transaction)."""
    rng = random.Random(seed)
    seconds = [rng.randrange(900) for _ in range(count)]
    return [(s, txn(f"card-{rng.randrange(10)}", T0 + timedelta(seconds=s), round(rng.uniform(1, 500), 2),
                    txn_id=f"t{i:04d}"))
            for i, s in enumerate(seconds)]


def test_every_row_has_its_history_statically(spark):
    txns = [t for _, t in _traffic()]
    want = expected([txns])
    assert sum(len(times) for times, _ in want.values()) > 1000     # real histories, capped and aged
    assert got(harness.run_static(HISTORY, txns, spark)) == want


def test_every_row_has_its_history_on_a_stream_arriving_out_of_order(spark, tmp_path):
    traffic = _traffic()
    # Each row arrives up to 90 s of event time early or late against its neighbours: within the watermark.
    batches = out_of_order(traffic, spread_s=90, per_batch=50, seed=11)
    want = expected(batches)
    assert want != expected([[t for _, t in traffic]])     # arrival order matters: the case is exercised
    batches.append([harness.watermark_tick(T0 + timedelta(hours=3))])

    result = harness.run_microbatches(HISTORY, batches, spark, tmp_path / "history")
    assert got(result.alerts) == want
    assert len(result.alerts) == len(traffic) and result.dropped() == 0
    # one state row per card; hours on, the idle cards are forgotten and only the tick's card is left
    assert max(result.state_rows()) >= 10 and result.state_rows()[-1] == 1


def test_rows_behind_the_watermark_are_dropped_and_counted(spark, tmp_path):
    first = txn("card-1", T0, 10.0, txn_id="a")
    tick = harness.watermark_tick(T0 + timedelta(minutes=30))
    late = txn("card-1", T0 + timedelta(seconds=20), 10.0, txn_id="b")
    result = harness.run_microbatches(HISTORY, [[first, tick], [late]], spark, tmp_path / "history")
    assert [a["txn_ids"] for a in result.alerts] == [["a"]]
    assert result.dropped(1) == 1
