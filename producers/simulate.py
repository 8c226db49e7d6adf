"""``simulate``: the simulator's stream to JSONL files or to Kafka (transactions + labels)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from common.settings import Settings
from producers.publish import Pacer, ProgressBar, Stats, finish, make_tuned_producer, partition_for
from producers.reference import reference_document
from producers.simulator import Batch, Simulator

CHUNK = 2000  # records sent between two looks at the clock, the pacer and the progress bar


def bounded(sim: Simulator, count: int | None, duration: float | None) -> Iterator[Batch]:
    """The stream up to ``count`` transactions (or forever: the caller stops on ``duration``)."""
    return sim.take(count) if count is not None else sim.batches()


def write_files(sim: Simulator, out: Path, count: int | None = None, duration: float | None = None,
                progress: bool = False) -> Stats:
    """DIR/transactions.jsonl (arrival order), DIR/labels.jsonl (one label per transaction) and
    DIR/reference.json (the world's profiles and the run's config)."""
    out.mkdir(parents=True, exist_ok=True)
    stats, bar = Stats(), ProgressBar(progress, count)
    deadline = time.monotonic() + duration if duration else None
    with open(out / "transactions.jsonl", "wb") as txns, open(out / "labels.jsonl", "wb") as labels:
        for batch in bounded(sim, count, duration):
            if deadline and time.monotonic() >= deadline:
                break
            txns.write(b"\n".join(batch.values) + b"\n" if len(batch) else b"")
            labels.writelines(line + b"\n" for _, line in batch.label_lines())
            stats.attempted += len(batch)
            bar.update(stats)
    (out / "reference.json").write_text(json.dumps(reference_document(sim), indent=1) + "\n")
    stats.finished = time.monotonic()
    bar.close(stats)
    return stats


def publish(sim: Simulator, settings: Settings, topic: str, count: int | None = None,
            duration: float | None = None, rate: float = 0.0, labels_topic: str | None = None,
            labels_file: Path | None = None, all_labels: bool = False, progress: bool = False,
            stats: Stats | None = None, producer: Any = None, compression: str | None = "auto",
            batches: Iterable[Batch] | None = None) -> Stats:
    """Send the stream to ``topic`` (key = card_id, on the card's partition), its labels to
    ``labels_topic`` (only fraud, look-alike or late ones unless ``all_labels``; missing = ordinary
    legitimate) and/or every label to ``labels_file``. Returns the counts, failures from callbacks.
    ``batches`` replaces the simulator's own stream (e.g. pre-generated, for the benchmark)."""
    producer = producer or make_tuned_producer(settings, compression=compression)
    stats = stats or Stats()
    stats.started = time.monotonic()
    keys = sim.card_keys
    n_parts = len(producer.partitions_for(topic))
    part_of_card = np.array([partition_for(k, n_parts) for k in keys], dtype=np.int64)
    pacer, bar = Pacer(rate), ProgressBar(progress, count)
    deadline = stats.started + duration if duration else None
    label_out = open(labels_file, "wb") if labels_file else None
    send, on_error = producer.send, stats.on_error
    try:
        for batch in (batches if batches is not None else bounded(sim, count, duration)):
            cards, values = batch.cards.tolist(), batch.values
            parts = part_of_card[batch.cards].tolist()
            i, n = 0, len(values)
            while i < n:
                if deadline and time.monotonic() >= deadline:
                    return stats
                j = min(n, i + min(CHUNK, pacer.allowance(stats.attempted)))
                for c, v, p in zip(cards[i:j], values[i:j], parts[i:j]):
                    send(topic, value=v, key=keys[c], partition=p).add_errback(on_error)
                stats.attempted += j - i
                if labels_topic or label_out:
                    _labels(producer, batch, i, j, keys, labels_topic, label_out, all_labels,
                            stats.on_label_error)
                i = j
                bar.update(stats)
            if deadline and time.monotonic() >= deadline:
                break
    finally:
        finish(producer, stats)
        bar.close(stats)
        if label_out:
            label_out.close()
    return stats


def _labels(producer, batch: Batch, lo: int, hi: int, keys, topic, out, all_labels, on_error) -> None:
    if out:
        out.writelines(line + b"\n" for _, line in batch.label_lines(lo=lo, hi=hi))
    if topic:
        for row, line in batch.label_lines(sparse=not all_labels, lo=lo, hi=hi):
            producer.send(topic, value=line, key=keys[batch.cards[row]]).add_errback(on_error)
