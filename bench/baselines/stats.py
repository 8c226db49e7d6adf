"""A baseline worker's live counters, rewritten atomically to a JSON file the benchmark polls."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


class StatsFile:
    def __init__(self, path: str | Path, interval: float = 0.5):
        self.path = Path(path)
        self.interval = interval
        self.first_wall: float | None = None
        self.last_wall: float | None = None
        self.assigned = False
        self._next = 0.0

    def touch_records(self, n: int, started: float | None = None) -> None:
        """``n`` records were processed, the work having begun at wall time ``started``."""
        if n:
            now = time.time()
            if self.first_wall is None:
                self.first_wall = started or now
            self.last_wall = now

    def maybe_write(self, counts: dict, state_rows: int | None = None, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._next:
            return
        self._next = now + self.interval
        doc = dict(counts, first_wall=self.first_wall, last_wall=self.last_wall, assigned=self.assigned,
                   state_rows=state_rows, rss_bytes=_rss(), pid=os.getpid(), written=time.time())
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.path)


def _rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0
