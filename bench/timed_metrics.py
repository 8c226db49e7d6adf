"""The detector job's metrics with a stopwatch on every piece of their code (``bench --only metrics``):
the progress hook, the writer's look at each output row, its count at commit, and each scrape.

The hooks are timed by the wall clock (``perf_counter``: a thread preempted inside them counts the wait
too, an upper bound on a loaded machine; the thread's CPU clock is a system call dearer than a row's
look). A scrape is timed by the CPU clocks of the two threads it runs on (``TimedRegistry``, the
scraper's), since its round trip on a loaded machine is mostly waiting for a core.
"""

from __future__ import annotations

import threading
import time

from spark_job.metrics import BatchTally, SparkMetrics

PARTS = ("progress", "writer_rows", "writer_commit", "scrape")


class TimedSparkMetrics(SparkMetrics):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seconds = dict.fromkeys(PARTS, 0.0)
        self._seconds_lock = threading.Lock()    # the listener, the writer and the scraper add from their threads

    def add(self, part: str, seconds: float) -> None:
        with self._seconds_lock:
            self.seconds[part] += seconds

    def record(self, progress: dict, summary: dict) -> None:
        started = time.perf_counter()
        try:
            super().record(progress, summary)
        finally:
            self.add("progress", time.perf_counter() - started)

    def batch(self, writer_id: str) -> "TimedTally":
        return TimedTally(self, writer_id)


class TimedRegistry:
    """``registry`` as the HTTP server reads it, the CPU of collecting and encoding every scrape counted
    (``generate_latest`` encodes each family as ``collect()`` yields it, on the server's thread)."""

    def __init__(self, registry, metrics: TimedSparkMetrics):
        self.registry, self.metrics = registry, metrics

    def collect(self):
        started = time.thread_time()
        try:
            yield from self.registry.collect()
        finally:
            self.metrics.add("scrape", time.thread_time() - started)

    def __getattr__(self, name):
        return getattr(self.registry, name)


class TimedTally(BatchTally):
    __slots__ = ()

    def rows(self, rows):
        count, clock, spent = self.count, time.perf_counter, 0.0
        try:
            for row in rows:
                started = clock()
                count(row)
                spent += clock() - started
                yield row
        finally:
            self.metrics.add("writer_rows", spent)

    def _timed_commit(self, end) -> None:
        started = time.perf_counter()
        try:
            end()
        finally:
            self.metrics.add("writer_commit", time.perf_counter() - started)

    def committed(self) -> None:
        self._timed_commit(super().committed)

    def aborted(self) -> None:
        self._timed_commit(super().aborted)
