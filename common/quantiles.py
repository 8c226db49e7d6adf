"""The one quantile the project reports (p50, p99 of latencies and batch times): the value at index
``int(q * n)`` of the sorted values, capped at the last; None for no values."""

from __future__ import annotations

from typing import Iterable


def quantile(values: Iterable[float], q: float, digits: int | None = 3) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    value = ordered[min(len(ordered) - 1, int(q * len(ordered)))]
    return value if digits is None else round(value, digits)
