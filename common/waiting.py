"""Polling with a deadline: how this project waits for anything (never a bare sleep)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.2) -> T:
    """Call ``condition`` until it returns a truthy value and return that value.

    Raises ``TimeoutError`` naming ``what`` was awaited if ``timeout`` seconds pass first. The pause
    between polls is the only sleep allowed: it paces the polling, it is not a guess at how long
    something takes.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)  # poll interval, bounded by the deadline above
