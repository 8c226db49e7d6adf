"""Publishing to Kafka with kafka-python: the tuned idempotent producer, pacing, progress, summary.

Throughput notes (measured on the 2-core dev machine, see ``bench/producer_throughput.py``):
kafka-python spends ~20 us of Python per ``send``; the simulator keeps its own share small by
building each value as one f-string of pre-rendered JSON fragments, sending bytes (no serializer
call) and passing the partition it computed once per card with the same murmur2 as the default
partitioner (so a record lands exactly where ``send(key=...)`` would put it). Large batches
(``linger_ms`` 20, ``batch_size`` 256 KiB) amortise the per-batch cost, and the ``crc32c`` package,
when installed, replaces kafka-python's pure-Python CRC of every batch, which otherwise halves
throughput.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from common.kafka_clients import explained_connect_errors, kafka_python_config
from common.settings import Settings

# Settings every producer of this module uses; ``compression_type`` is added when a codec is present.
PRODUCER_TUNING: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "linger_ms": 20,
    "batch_size": 256 * 1024,
    "max_request_size": 4 * 1024 * 1024,
    # A broker restarted or paused for minutes delays records, never expires them: an expired record is in
    # doubt (it may be in the log), and no other producer can send it again without a duplicate.
    "delivery_timeout_ms": 600_000,
}
REPORT_EVERY_S = 5.0     # a failed delivery is reported at once, then at most one line this often


def best_compression() -> str | None:
    """lz4 if its Python binding is installed, else none: on a local broker compression only costs
    CPU; on a network it saves bandwidth. Override with ``--compression``."""
    from kafka import codec

    return "lz4" if codec.has_lz4() else None


def make_tuned_producer(settings: Settings, compression: str | None = "auto", **overrides: Any):
    from kafka import KafkaProducer

    from common import producer_recovery

    producer_recovery.install()
    config: dict[str, Any] = dict(kafka_python_config(settings), **PRODUCER_TUNING)
    codec_name = best_compression() if compression == "auto" else compression
    if codec_name and codec_name != "none":
        config["compression_type"] = codec_name
    config.update(overrides)
    with explained_connect_errors(settings):     # a wrong password or CA: a clear error, not a timeout
        return KafkaProducer(**config)


def partition_for(key: bytes, partitions: int) -> int:
    """The partition kafka-python's and the Java client's default partitioner pick for ``key``."""
    from kafka.partitioner.default import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


class Pacer:
    """A token bucket against a monotonic schedule: ``allowance(sent)`` says how many records may go
    now (at least one), sleeping only when the schedule is ahead. Records go out in bursts of
    ``burst`` (about 5 ms worth), never one sleep per record. ``rate`` <= 0 means no limit."""

    UNLIMITED = 1 << 30

    def __init__(self, rate: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, burst: int | None = None):
        self.rate, self.clock, self.sleep = rate, clock, sleep
        self.burst = burst or max(1, int(rate / 200)) if rate > 0 else 0
        self.start = clock()

    def allowance(self, sent: int) -> int:
        if self.rate <= 0:
            return self.UNLIMITED
        while True:
            allowed = int((self.clock() - self.start) * self.rate) + self.burst - sent
            if allowed > 0:
                return allowed
            due = self.start + sent / self.rate  # when a whole burst is allowed again
            self.sleep(max(due - self.clock(), 0.0005))  # pacing a producer to a schedule


@dataclass
class Stats:
    """Live counters of one run; ``failed`` is counted by delivery callbacks, never guessed."""
    attempted: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    unconfirmed: int = 0            # set when the final flush timed out
    label_failed: int = 0           # labels that could not be delivered (counted apart)
    next_report: float = field(default=0.0, repr=False)

    def on_error(self, exc: BaseException) -> None:
        self.failed += 1
        if len(self.errors) < 10:
            self.errors.append(repr(exc))
        self._report(exc)

    def on_label_error(self, exc: BaseException) -> None:
        self.label_failed += 1
        if len(self.errors) < 10:
            self.errors.append(f"label: {exc!r}")
        self._report(exc)

    def _report(self, exc: BaseException) -> None:
        """One line on stderr at the first failure, then at most every ``REPORT_EVERY_S``, with the counts
        so far: a failure is known while it happens, not at the summary."""
        now = time.monotonic()
        if now >= self.next_report:
            self.next_report = now + REPORT_EVERY_S
            print(f"delivery failed: {self.failed:,} transactions and {self.label_failed:,} labels so far "
                  f"({exc!r})", file=sys.stderr, flush=True)

    @property
    def sent(self) -> int:
        return self.attempted - self.failed - self.unconfirmed

    @property
    def elapsed(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed if self.elapsed > 0 else 0.0

    def summary(self) -> dict[str, Any]:
        return {"sent": self.sent, "failed": self.failed, "unconfirmed": self.unconfirmed,
                "labels_failed": self.label_failed,
                "elapsed_s": round(self.elapsed, 3), "rate_per_s": round(self.rate, 1),
                "errors": self.errors}


def finish(producer, stats: Stats, timeout: float = 120.0) -> Stats:
    """Flush and close; whatever the flush could not confirm is reported, not assumed delivered."""
    from kafka.errors import KafkaTimeoutError

    try:
        producer.flush(timeout=timeout)
    except KafkaTimeoutError as exc:
        # kafka-python exposes no count of acknowledged records: everything not failed is in doubt
        stats.unconfirmed = max(0, stats.attempted - stats.failed)
        stats.errors.append(f"flush timed out: {exc!r}")
    stats.finished = time.monotonic()
    producer.close(timeout=10)
    return stats


def progress_enabled(flag: bool | None = None) -> bool:
    if flag is not None:
        return flag
    return sys.stdout.isatty() and os.environ.get("CI", "").lower() not in {"1", "true", "yes"}


class ProgressBar:
    """A rich progress bar with the live rate, refreshed at most 4 times a second; a no-op when off."""

    def __init__(self, enabled: bool, total: int | None, what: str = "transactions"):
        self.enabled = enabled
        self._next = 0.0
        if enabled:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, SpinnerColumn,
                                       TextColumn, TimeElapsedColumn)

            columns = [SpinnerColumn(), TextColumn("{task.description}"),
                       BarColumn() if total else TextColumn(""), MofNCompleteColumn() if total
                       else TextColumn("{task.completed:,}"), TextColumn("{task.fields[rate]}"),
                       TimeElapsedColumn()]
            self._progress = Progress(*columns, transient=False)
            self._task = self._progress.add_task(what, total=total, rate="")
            self._progress.start()

    def update(self, stats: Stats, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if force or now >= self._next:
            self._next = now + 0.25
            self._progress.update(self._task, completed=stats.attempted,
                                  rate=f"{stats.attempted / max(stats.elapsed, 1e-9):,.0f}/s")

    def close(self, stats: Stats) -> None:
        if self.enabled:
            self.update(stats, force=True)
            self._progress.stop()
