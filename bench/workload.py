"""Benchmark input in the transaction contract: a pre-loaded topic and a paced live stream.

Both generators are lightweight (numpy + one f-string per record) so a 1M-card population costs
seconds, not the simulator's world building; the records are ordinary contract JSON (they pass
``common.contracts.decode_transaction``) with the double-swipe and card-testing patterns the
detectors look for.

Pre-loaded (``generate``): ``count`` transactions over a population of ``cards`` cards, event time
advancing at ``event_rate`` transactions per second of event time (100/s by default: 
a large issuer, so the double-swipe join holds ~3 minutes = ~18k transactions of state), arrival order =
event order plus up to 3 s of jitter. Injected: double swipes (the same card, merchant and amount again
1-50 s later, ``swipe_rate`` per transaction) and card-testing bursts (5-12 e-commerce charges of
0.50-3.00, 5-40 s apart, ``burst_rate`` per transaction).

Live (``python -m bench.workload live``): a steady rate against a monotonic schedule (``Pacer``), event
time = the wall clock when the record is built; a share ``swipe_rate`` of card-present transactions is
swiped again ``swipe_gap`` seconds later, with the wall clock at that moment as its event time, so the
alert's ``event_time`` (the second swipe's) is the moment the fraud happened.
"""

from __future__ import annotations

import argparse
import heapq
import json
import time
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from common.settings import Settings, get_settings
from producers.publish import Pacer, Stats, finish, make_tuned_producer, partition_for

# Benchmark input is published uncompressed: aiokafka (under Faust) cannot read lz4 batches without the
# ``cramjam`` package, which the project does not install; on a local broker compression only costs CPU.
NO_COMPRESSION = None
START = datetime(2026, 1, 5, tzinfo=timezone.utc)
CHANNELS = np.array(["pos", "ecom", "atm"])
MCCS = ["5411", "5812", "5999", "4111", "5732", "6011"]


@dataclass(frozen=True)
class Workload:
    count: int
    cards: int
    seed: int = 1
    event_rate: float = 100.0       # transactions per second of event time
    swipe_rate: float = 0.005       # double swipes per transaction
    burst_rate: float = 0.0005      # card-testing bursts per transaction
    jitter_s: float = 3.0

    def describe(self) -> dict:
        return {"count": self.count, "cards": self.cards, "seed": self.seed, "event_rate": self.event_rate,
                "swipe_rate": self.swipe_rate, "burst_rate": self.burst_rate, "jitter_s": self.jitter_s}


def _card_id(i: int) -> str:
    return f"card-{i:07d}"


def _merchant_place(m: np.ndarray, rng_seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A fixed place per merchant: its region's centre (Europe-ish box) plus up to ~5 km."""
    rng = np.random.default_rng([rng_seed, 99])
    region = m // 50
    lat_r = rng.uniform(36.0, 60.0, 1 << 16)
    lon_r = rng.uniform(-9.0, 30.0, 1 << 16)
    lat_off = rng.uniform(-0.05, 0.05, 1 << 16)
    lon_off = rng.uniform(-0.05, 0.05, 1 << 16)
    return lat_r[region % (1 << 16)] + lat_off[m % (1 << 16)], lon_r[region % (1 << 16)] + lon_off[m % (1 << 16)]


def generate(w: Workload) -> tuple[list[bytes], list[bytes], dict]:
    """(keys, values, truth) in arrival order; ``truth`` counts the injected patterns."""
    rng = np.random.default_rng(w.seed)
    n_base = w.count
    n_swipes = int(round(n_base * w.swipe_rate))
    n_bursts = int(round(n_base * w.burst_rate))
    burst_sizes = rng.integers(5, 13, n_bursts)
    n_base = max(1, w.count - n_swipes - int(burst_sizes.sum()))
    # merchants live in regions of 50 (a town); a card shops at 5 merchants of its home region, so its
    # card-present uses are a few km apart (no accidental impossible travel)
    n_regions = max(10, w.cards // 1000)
    n_merchants = n_regions * 50

    card = rng.integers(0, w.cards, n_base)
    # each card shops at a handful of merchants near home: merchant depends on card and a small choice
    merchant = (card % n_regions) * 50 + (card * 7 + rng.integers(0, 5, n_base) * 11) % 50
    channel = rng.choice(3, n_base, p=[0.70, 0.25, 0.05])
    amount = np.round(np.minimum(rng.lognormal(3.3, 0.9, n_base), 5000.0), 2)
    amount = np.maximum(amount, 0.5)
    t_ms = (START.timestamp() * 1000 + np.arange(n_base) / w.event_rate * 1000).astype(np.int64)
    t_ms += rng.integers(0, 1000, n_base)                       # not perfectly regular

    # double swipes: a card-present transaction again 1-50 s later, same card, merchant, amount
    pos = np.flatnonzero(channel == 0)
    src = np.sort(rng.choice(pos, size=min(n_swipes, len(pos)), replace=False))
    sw_t = t_ms[src] + rng.integers(1000, 50_001, len(src))
    # card testing: 5-12 small e-commerce charges 5-40 s apart on a random card
    b_card = np.repeat(rng.integers(0, w.cards, n_bursts), burst_sizes)
    b_start = np.repeat(START.timestamp() * 1000 + rng.uniform(0, max(n_base / w.event_rate * 0.2, n_base / w.event_rate - 600) * 1000, n_bursts),
                        burst_sizes).astype(np.int64)
    b_gap = np.concatenate([np.cumsum(rng.integers(5000, 40_001, k)) for k in burst_sizes]) if n_bursts else \
        np.zeros(0, dtype=np.int64)
    b_amount = np.concatenate([rng.choice(np.arange(50, 301), k, replace=False) / 100 for k in burst_sizes]) \
        if n_bursts else np.zeros(0)

    all_card = np.concatenate([card, card[src], b_card])
    all_merch = np.concatenate([merchant, merchant[src], (b_card % 50) + n_merchants])   # ecom merchants
    all_chan = np.concatenate([channel, channel[src], np.ones(len(b_card), dtype=np.int64)])
    all_amount = np.concatenate([amount, amount[src], b_amount])
    all_t = np.concatenate([t_ms, sw_t, b_start + b_gap])
    order = np.argsort(all_t, kind="stable")
    all_card, all_merch, all_chan, all_amount, all_t = (a[order] for a in
                                                       (all_card, all_merch, all_chan, all_amount, all_t))
    arrival = np.argsort(all_t + rng.integers(0, int(w.jitter_s * 1000) + 1, len(all_t)), kind="stable")

    lat, lon = _merchant_place(all_merch, w.seed)
    times = np.datetime_as_string(all_t.astype("datetime64[ms]"), unit="ms").tolist()
    keys, values = [], []
    for i in arrival.tolist():
        c, m, ch = int(all_card[i]), int(all_merch[i]), int(all_chan[i])
        cid = _card_id(c)
        place = ('"lat":null,"lon":null' if ch == 1 else f'"lat":{lat[i]:.5f},"lon":{lon[i]:.5f}')
        values.append((f'{{"txn_id":"t{w.seed}-{i:08d}","card_id":"{cid}","customer_id":"cust-{c:07d}",'
                       f'"merchant_id":"m-{m:06d}","terminal_id":"term-{m:06d}-1","amount":{float(all_amount[i])!r},'
                       f'"currency":"EUR","event_time":"{times[i]}Z","channel":"{CHANNELS[ch]}",'
                       f'"mcc":"{MCCS[m % len(MCCS)]}",{place}}}').encode())
        keys.append(cid.encode())
    truth = {"transactions": len(values), "double_swipes": int(len(src)), "card_testing_bursts": int(n_bursts),
             "distinct_cards_in_data": int(len(np.unique(all_card))),
             "event_time_span_s": round(float(all_t.max() - all_t.min()) / 1000, 1)}
    return keys, values, truth


def publish_values(settings: Settings, topic: str, keys: list[bytes], values: list[bytes]) -> dict:
    """Send pre-built records keyed by card (partition computed once per card, as the simulator does)."""
    producer = make_tuned_producer(settings, compression=None)   # see NO_COMPRESSION
    n_parts = len(producer.partitions_for(topic))
    cache: dict[bytes, int] = {}
    stats = Stats()
    send, on_error = producer.send, stats.on_error
    for key, value in zip(keys, values):
        p = cache.get(key)
        if p is None:
            p = cache[key] = partition_for(key, n_parts)
        send(topic, value=value, key=key, partition=p).add_errback(on_error)
    stats.attempted = len(values)
    finish(producer, stats)
    if stats.failed or stats.unconfirmed:
        raise RuntimeError(f"pre-loading {topic} failed: {stats.summary()}")
    return stats.summary()


# ------------------------------------------------------------------------------------------------
# Live: a steady rate with event_time = now
# ------------------------------------------------------------------------------------------------

def _now_text() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"


def live(settings: Settings, topic: str, rate: float, duration: float, cards: int, swipe_rate: float,
         swipe_gap: float, seed: int, run_id: str) -> dict:
    rng = np.random.default_rng(seed)
    producer = make_tuned_producer(settings, compression=None, linger_ms=5)
    n_parts = len(producer.partitions_for(topic))
    part = {}
    pending: list[tuple[float, int, bytes, str]] = []   # (due monotonic, seq, key, value template)
    stats, pacer = Stats(), Pacer(rate)
    send, on_error = producer.send, stats.on_error
    end = time.monotonic() + duration
    seq = swipes = 0
    block = 4096
    r_card = r_merch = r_amount = r_swipe = r_chan = None
    k = block
    while True:
        now_mono = time.monotonic()
        if now_mono >= end:
            break
        allowed = min(pacer.allowance(stats.attempted), 2000)
        stamp = _now_text()
        while pending and pending[0][0] <= now_mono:
            _, _, key, tmpl = heapq.heappop(pending)
            send(topic, value=tmpl.replace("@T@", stamp).encode(), key=key,
                 partition=part[key]).add_errback(on_error)
            stats.attempted += 1
            allowed -= 1
        for _ in range(max(0, allowed)):
            if k >= block:
                r_card = rng.integers(0, cards, block).tolist()
                r_merch = rng.integers(0, 5, block).tolist()
                r_amount = np.round(np.maximum(rng.lognormal(3.3, 0.9, block), 0.5), 2).tolist()
                r_swipe = (rng.random(block) < swipe_rate).tolist()
                r_chan = rng.choice(3, block, p=[0.70, 0.25, 0.05]).tolist()
                k = 0
            c, m, a, ch = r_card[k], (r_card[k] * 7 + r_merch[k] * 104729) % 5000, r_amount[k], r_chan[k]
            swipe = r_swipe[k] and ch == 0
            k += 1
            seq += 1
            cid = f"card-{c:07d}"
            key = cid.encode()
            if key not in part:
                part[key] = partition_for(key, n_parts)
            place = '"lat":null,"lon":null' if ch == 1 else f'"lat":48.{m:05d},"lon":2.{m:05d}'
            tmpl = (f'{{"txn_id":"L{run_id}-{seq:09d}@S@","card_id":"{cid}","customer_id":"cust-{c:07d}",'
                    f'"merchant_id":"m-{m:06d}","terminal_id":"term-{m:06d}-1","amount":{a!r},"currency":"EUR",'
                    f'"event_time":"@T@","channel":"{CHANNELS[ch]}","mcc":"{MCCS[m % len(MCCS)]}",{place}}}')
            send(topic, value=tmpl.replace("@S@", "").replace("@T@", stamp).encode(), key=key,
                 partition=part[key]).add_errback(on_error)
            stats.attempted += 1
            if swipe:
                swipes += 1
                heapq.heappush(pending, (now_mono + swipe_gap, seq, key, tmpl.replace("@S@", "b")))
    finish(producer, stats)
    summary = stats.summary()
    summary.update({"target_rate": rate, "achieved_rate": round(stats.sent / duration, 1), "duration_s": duration,
                    "double_swipes": swipes - len(pending), "swipe_gap_s": swipe_gap})
    return summary


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workload", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    lv = sub.add_parser("live", help="publish at a steady rate with event_time = now")
    lv.add_argument("--topic", required=True)
    lv.add_argument("--rate", type=float, required=True)
    lv.add_argument("--duration", type=float, required=True)
    lv.add_argument("--cards", type=int, default=100_000)
    lv.add_argument("--swipe-rate", type=float, default=0.01)
    lv.add_argument("--swipe-gap", type=float, default=0.5)
    lv.add_argument("--seed", type=int, default=7)
    lv.add_argument("--run-id", default="x")
    lv.add_argument("--out", required=True, help="JSON summary written here at the end")
    args = parser.parse_args(argv)
    summary = live(get_settings(), args.topic, args.rate, args.duration, args.cards, args.swipe_rate,
                   args.swipe_gap, args.seed, args.run_id)
    with open(args.out, "w") as f:
        json.dump(summary, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
