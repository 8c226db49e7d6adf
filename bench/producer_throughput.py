"""Simulator-to-broker throughput against kafka-python's raw producer, in one run, alternating rounds.

    .venv/bin/python -m bench.producer_throughput [--count 100000] [--rounds 3]

Each round runs, one after the other on a fresh 12-partition topic each:
  raw           KafkaProducer.send(topic, key, value) of pre-built messages of the simulator's mean
                size and the same card keys (the default partitioner hashes each key);
  raw_partition the same with the partition precomputed per key, as the simulator does;
  sim_live      the simulator generating on the fly while it publishes (what ``simulate`` does);
  sim_pregen    the simulator's transactions generated beforehand, then published.
All producers share the tuned settings of ``producers.publish`` (acks=all, idempotent, linger,
batch size, compression). Writes artifacts/bench/producer-<timestamp>.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import uuid
from datetime import datetime, timezone

from common.settings import REPO_ROOT, get_settings
from common.kafka_admin import TopicSpec, create_topics, delete_topics
from producers.publish import PRODUCER_TUNING, Stats, best_compression, finish, make_tuned_producer, partition_for
from producers.simulate import publish
from producers.simulator import SimConfig, Simulator


def run_raw(settings, topic, keys, value, compression, partitioned: bool) -> float:
    producer = make_tuned_producer(settings, compression=compression)
    n_parts = len(producer.partitions_for(topic))
    stats = Stats()
    send, on_error = producer.send, stats.on_error
    if partitioned:
        cache: dict[bytes, int] = {}
        for key in keys:
            p = cache.get(key)
            if p is None:
                p = cache[key] = partition_for(key, n_parts)
            send(topic, value=value, key=key, partition=p).add_errback(on_error)
    else:
        for key in keys:
            send(topic, value=value, key=key).add_errback(on_error)
    stats.attempted = len(keys)
    finish(producer, stats)
    assert stats.failed == 0 and stats.unconfirmed == 0, stats.summary()
    return stats.rate


def run_sim(settings, topic, sim, count, compression, pregen: bool) -> float:
    batches = list(sim.take(count)) if pregen else None
    stats = publish(sim, settings, topic, count=count, compression=compression, batches=batches)
    assert stats.failed == 0 and stats.unconfirmed == 0 and stats.sent == count, stats.summary()
    return stats.rate


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=100_000, help="messages per variant and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compression", default="auto", help="auto (lz4 if installed, else none), none, lz4, ...")
    args = parser.parse_args(argv)
    settings = get_settings()
    compression = best_compression() if args.compression == "auto" else args.compression

    sim = Simulator(SimConfig(seed=args.seed))
    sample = [b for b in sim.take(args.count)]
    values = [v for b in sample for v in b.values]
    keys = [sim.card_keys[c] for b in sample for c in b.cards.tolist()]
    mean_size = round(sum(map(len, values)) / len(values))
    raw_value = b"x" * mean_size

    variants = {
        "raw": lambda t: run_raw(settings, t, keys, raw_value, compression, partitioned=False),
        "raw_partition": lambda t: run_raw(settings, t, keys, raw_value, compression, partitioned=True),
        "sim_live": lambda t: run_sim(settings, t, sim, args.count, compression, pregen=False),
        "sim_pregen": lambda t: run_sim(settings, t, sim, args.count, compression, pregen=True),
    }
    results: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.rounds):
        for name, run in variants.items():
            topic = f"bench.producer.{uuid.uuid4().hex[:8]}"
            create_topics(settings, [TopicSpec(topic, settings.partitions_transactions)])
            try:
                results[name].append(round(run(topic), 1))
            finally:
                delete_topics(settings, [topic])
            print(f"round {r + 1} {name:<14} {results[name][-1]:>10,.0f} msg/s", flush=True)

    median = {name: statistics.median(rates) for name, rates in results.items()}
    report = {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg": os.getloadavg()},
        "count_per_round": args.count, "rounds": args.rounds, "mean_value_bytes": mean_size,
        "producer": dict(PRODUCER_TUNING, compression_type=compression or "none"),
        "crc32c_c_extension": _has_crc32c(),
        "rates": results, "median": median,
        "ratio_sim_live_vs_raw": round(median["sim_live"] / median["raw"], 3),
        "ratio_sim_pregen_vs_raw": round(median["sim_pregen"] / median["raw"], 3),
        "ratio_sim_live_vs_raw_partition": round(median["sim_live"] / median["raw_partition"], 3),
        "targets": {"min_tx_per_s": 30_000, "min_ratio": 0.7},
    }
    out = REPO_ROOT / "artifacts" / "bench" / f"producer-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{'variant':<14} {'median msg/s':>13}   rounds")
    for name, rates in results.items():
        print(f"{name:<14} {median[name]:>13,.0f}   {', '.join(f'{x:,.0f}' for x in rates)}")
    print(f"ratio sim_live/raw {report['ratio_sim_live_vs_raw']}, sim_pregen/raw {report['ratio_sim_pregen_vs_raw']}"
          f"  (load avg {os.getloadavg()[0]:.1f})\n-> {out}")
    return 0


def _has_crc32c() -> bool:
    from kafka.record import util

    return util._crc32c is not util.crc32c_py


if __name__ == "__main__":
    raise SystemExit(main())
