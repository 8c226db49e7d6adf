"""Event-time timeouts for the per-key Python state of ``applyInPandasWithState``.

Spark drops rows behind the watermark before a stateful operator using the *previous* micro-batch's
watermark, but checks ``setTimeoutTimestamp`` against the *current* one. A row between the two reaches
the function (the chaos suite sent a valid transaction dated 2001 as the first row of a new key right
after the watermark moved), and a timeout computed from its event time fails the whole query with
``INVALID_TIMEOUT_TIMESTAMP``. So every per-key function sets its timeout through ``timeout_after``.
"""

from __future__ import annotations


def timeout_after(state, wanted_ms: int) -> int:
    """``wanted_ms``, or just after the current watermark if that is later (the key is then evicted
    at the next watermark move instead of failing the query)."""
    return max(int(wanted_ms), int(state.getCurrentWatermarkMs()) + 1)
