"""What ``ml_score``'s Python steps cost per transaction, by number of state buckets, without Spark.

    .venv/bin/python -m bench.ml_rows [--count 60000] [--batch 1000] [--buckets 64 8 2] [--free-threads]

The simulator's transactions (``producers simulate --out``) go through the streaming path's pandas code
in arrival order, ``--batch`` at a time as a live micro-batch would: each bucket's state decoded,
``bucket_step`` (row and customer features), the state encoded; then the terminal features from the
registered model's terminal table (``TerminalLookup``) and the scoring with its explanation. Prints
microseconds per transaction for each step and bucket count; ``--free-threads`` runs the first bucket
count once more with scikit-learn's threads as it leaves them (``models.scoring.hold_threads`` off,
scoring as ``ml_score`` did before it), first: once held, a process's threads stay held. Spark's own costs are not in it: the demo
report's batch phases and CPU seconds give those). Needs a registered model (``make train``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from common.keyed_histories import KeyedHistories
from common.settings import REPO_ROOT
from detectors.ml_score import _score_function
from models import features as fx
from models import registry
from models.spark_features import bucket_step
from models.terminal_lookup import TerminalLookup


def simulated(count: int) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "producers", "simulate", "--count", str(count), "--out", out,
                        "--no-progress", "--scenario", "amount_over_220=1"], cwd=REPO_ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        frame = pd.read_json(Path(out) / "transactions.jsonl", lines=True, dtype={"card_id": str})
    frame["event_time"] = pd.to_datetime(frame["event_time"], utc=True).dt.tz_localize(None)
    frame["ingested_at"] = frame["event_time"]
    return frame


def per_row_us(frame: pd.DataFrame, artifact, buckets: int, batch: int) -> dict[str, float]:
    bucket_of = np.array([zlib.crc32(c.encode()) % buckets for c in frame["customer_id"]])
    lookup = TerminalLookup(artifact.terminal_table)
    score = _score_function(artifact.estimator, list(fx.FEATURES), dict(artifact.baseline),
                            float(artifact.threshold), 3)
    state: dict[int, tuple] = {}
    spent = dict.fromkeys(("state codec", "customer step", "terminal features", "score + explain"), 0.0)
    for start in range(0, len(frame), batch):
        rows, keys = frame.iloc[start:start + batch], bucket_of[start:start + batch]
        stepped = []
        for key in np.unique(keys):
            t0 = time.perf_counter()
            histories = KeyedHistories.decode(state[key]) if key in state else KeyedHistories()
            t1 = time.perf_counter()
            stepped.append(bucket_step(histories, rows[keys == key].reset_index(drop=True)))
            t2 = time.perf_counter()
            state[key] = histories.encode()
            spent["state codec"] += (t1 - t0) + (time.perf_counter() - t2)
            spent["customer step"] += t2 - t1
        pdf = pd.concat(stepped, ignore_index=True)
        t0 = time.perf_counter()
        terminal = fx.terminal_features(lookup.rows(pdf["terminal_id"], pdf["day"].to_numpy()), fx.to_ms(pdf["event_time"]))
        featured = pd.concat([pdf, terminal], axis=1)
        t1 = time.perf_counter()
        list(score(iter([featured])))
        spent["terminal features"] += t1 - t0
        spent["score + explain"] += time.perf_counter() - t1
    return {name: round(1e6 * seconds / len(frame), 1) for name, seconds in spent.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ml_rows", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=60_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--buckets", type=int, nargs="+", default=[64, 8, 2])
    parser.add_argument("--free-threads", action="store_true",
                        help="also score with scikit-learn's own thread count (OpenMP threads per core)")
    args = parser.parse_args(argv)
    frame, artifact = simulated(args.count), registry.load("latest")
    if args.free_threads:
        from models import scoring

        scoring.hold_threads, held = (lambda: None), scoring.hold_threads
        try:
            free = per_row_us(frame, artifact, args.buckets[0], args.batch)
        finally:
            scoring.hold_threads = held
        print(f"{args.buckets[0]:>4} buckets, scikit-learn's own threads: µs per transaction " + json.dumps(free),
              flush=True)
    results = {}
    for buckets in args.buckets:
        results[buckets] = per_row_us(frame, artifact, buckets, args.batch)
        print(f"{buckets:>4} buckets, {args.batch:,}-row batches: µs per transaction "
              + json.dumps(results[buckets]) + f", total {sum(results[buckets].values()):.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
