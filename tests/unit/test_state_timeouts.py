"""A row far behind the watermark reaching a per-key function must not fail the query.

Spark drops late rows with the previous micro-batch's watermark but checks timeouts against the
current one, so such a row can arrive (found by the chaos suite: a valid transaction dated 2001 as the
first row of a new key). A detector's own Python state (``applyInPandasWithState``) sets its timeouts through
``common.state_timeouts.timeout_after``, checked here with PySpark's own ``GroupState``, as its Python worker
builds it; the job jar's keyed operators (``fraud.spark.RecentHistory``) apply the same rule in Java.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from common.state_timeouts import timeout_after

WATERMARK_MS = int(datetime(2026, 1, 7, tzinfo=timezone.utc).timestamp() * 1000)


def fresh_state(watermark_ms: int = WATERMARK_MS) -> GroupState:
    """No state for the key yet, event-time timeouts, the batch's watermark at ``watermark_ms``."""
    return GroupState(optionalValue=None, batchProcessingTimeMs=watermark_ms, eventTimeWatermarkMs=watermark_ms,
                      timeoutConf=GroupStateTimeout.EventTimeTimeout, hasTimedOut=False, watermarkPresent=True,
                      defined=False, updated=False, removed=False, timeoutTimestamp=-1, keyAsUnsafe=b"",
                      valueSchema=None)


def test_a_timeout_is_never_set_behind_the_watermark():
    state = fresh_state()
    assert timeout_after(state, WATERMARK_MS + 5_000) == WATERMARK_MS + 5_000
    assert timeout_after(state, 978_307_200_000) == WATERMARK_MS + 1       # 2001: just after the watermark


def test_without_the_guard_spark_would_fail_the_query():
    """What ``timeout_after`` prevents: PySpark refuses a timeout behind the watermark."""
    from pyspark.errors import PySparkValueError

    with pytest.raises(PySparkValueError, match="INVALID_TIMEOUT_TIMESTAMP"):
        fresh_state().setTimeoutTimestamp(978_307_200_000)
