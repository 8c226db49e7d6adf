"""``replay``: publish a JSONL file of transactions, as fast as possible or paced by event time.

Policy for lines that break the contract (``common.contracts.decode_transaction``): by default the
whole file is checked first and, if any line is bad, every bad line is reported with its number and
*nothing* is published (exit code 2): a half-published file is worse than none. With ``--raw`` every
line is published in file order as its exact bytes, bad ones included (key = their ``card_id`` when
one can be read, else null), so the pipeline's dead-letter path can be exercised; bad lines are still
reported.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from common.contracts import ContractError, decode_transaction, parse_event_time


@dataclass(frozen=True)
class Line:
    number: int                 # 1-based line number in the file
    value: bytes                # the line's exact bytes, without the newline
    key: bytes | None           # card_id, when one can be read
    event_ms: int | None        # event time of a valid line
    problem: str | None         # why the line breaks the contract, or None


def read_lines(path: Path) -> Iterator[Line]:
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            yield check_line(number, raw.rstrip(b"\r\n"))


def check_line(number: int, value: bytes) -> Line:
    try:
        txn = decode_transaction(value)
    except ContractError as exc:
        return Line(number, value, extract_card_id(value), None, str(exc))
    moment = parse_event_time(txn["event_time"])
    return Line(number, value, txn["card_id"].encode(), int(moment.timestamp() * 1000), None)


def extract_card_id(value: bytes) -> bytes | None:
    """The ``card_id`` of a line that is JSON enough to have one (a string), else None."""
    try:
        obj = json.loads(value)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    card = obj.get("card_id") if isinstance(obj, dict) else None
    return card.encode() if isinstance(card, str) and card else None


def problems(path: Path) -> list[Line]:
    return [line for line in read_lines(path) if line.problem]


class EventTimePacer:
    """Release a record at ``first wall time + (event time - first event time) / speedup``; a record
    whose moment has passed (out of order, or the producer is behind) goes at once. It sleeps only
    when the schedule is more than ``slack`` ahead, so records go out in bursts."""

    def __init__(self, speedup: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, slack: float = 0.005):
        if speedup <= 0:
            raise ValueError("speedup must be > 0")
        self.speedup, self.clock, self.sleep, self.slack = speedup, clock, sleep, slack
        self.origin: tuple[float, int] | None = None

    def due(self, event_ms: int) -> float:
        """Wall-clock (monotonic) time at which a record of ``event_ms`` is due."""
        if self.origin is None:
            self.origin = (self.clock(), event_ms)
        wall0, event0 = self.origin
        return wall0 + (event_ms - event0) / 1000 / self.speedup

    def wait(self, event_ms: int | None) -> None:
        if event_ms is None:
            return
        ahead = self.due(event_ms) - self.clock()
        if ahead > self.slack:
            self.sleep(ahead)  # pacing replay to event time


def publish_file(settings, path: Path, topic: str, raw: bool = False, speedup: float | None = None,
                 rate: float = 0.0, progress: bool = False, producer=None, compression: str | None = "auto",
                 report: Callable[[Line], None] = lambda line: None):
    """Publish ``path`` to ``topic``; returns (Stats, bad lines). Without ``raw``, a file with any bad
    line publishes nothing (Stats with 0 attempted)."""
    from producers.publish import Pacer, ProgressBar, Stats, finish, make_tuned_producer

    stats = Stats()
    if not raw:
        bad = problems(path)
        for line in bad:
            report(line)
        if bad:
            stats.finished = time.monotonic()
            return stats, bad
    producer = producer or make_tuned_producer(settings, compression=compression)
    stats.started = time.monotonic()
    pacer, bar = Pacer(rate), ProgressBar(progress, None, "lines")
    paced = EventTimePacer(speedup) if speedup else None
    bad = []
    allowance = 0
    try:
        for line in read_lines(path):
            if line.problem:
                bad.append(line)
                report(line)
            if paced:
                paced.wait(line.event_ms)
            if allowance <= 0:
                allowance = pacer.allowance(stats.attempted)
                bar.update(stats)
            producer.send(topic, value=line.value, key=line.key).add_errback(stats.on_error)
            stats.attempted += 1
            allowance -= 1
    finally:
        finish(producer, stats)
        bar.close(stats)
    return stats, bad
