"""A row far behind the watermark reaching a per-key function must not fail the query.

Spark drops late rows with the previous micro-batch's watermark but checks timeouts against the
current one, so such a row can arrive (found by the chaos suite: a valid transaction dated 2001 as the
first row of a new key). The per-key functions of ``amount_anomaly`` (per bucket of cards) and of ``ml_score``'s customer
features run here with PySpark's own ``GroupState``, as its Python worker builds it.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd
import pytest
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout

from detectors import amount_anomaly, samples
from common.state_timeouts import timeout_after
from models import spark_features

WATERMARK_MS = int(datetime(2026, 1, 7, tzinfo=timezone.utc).timestamp() * 1000)


def fresh_state(watermark_ms: int = WATERMARK_MS) -> GroupState:
    """No state for the key yet, event-time timeouts, the batch's watermark at ``watermark_ms``."""
    return GroupState(optionalValue=None, batchProcessingTimeMs=watermark_ms, eventTimeWatermarkMs=watermark_ms,
                      timeoutConf=GroupStateTimeout.EventTimeTimeout, hasTimedOut=False, watermarkPresent=True,
                      defined=False, updated=False, removed=False, timeoutTimestamp=-1, keyAsUnsafe=b"",
                      valueSchema=None)


def very_late_row() -> pd.DataFrame:
    txn = samples.txn("card-old", datetime(2001, 1, 1, tzinfo=timezone.utc), 12.5, txn_id="t-2001")
    frame = pd.DataFrame([txn])
    frame["event_time"] = pd.to_datetime(frame["event_time"]).dt.tz_localize(None)   # as Spark hands it over
    return frame


def test_a_timeout_is_never_set_behind_the_watermark():
    state = fresh_state()
    assert timeout_after(state, WATERMARK_MS + 5_000) == WATERMARK_MS + 5_000
    assert timeout_after(state, 978_307_200_000) == WATERMARK_MS + 1       # 2001: just after the watermark


def test_amount_anomaly_keeps_running_on_a_row_far_behind_the_watermark():
    state = fresh_state()
    per_bucket = amount_anomaly._streaming_function(amount_anomaly.AmountAnomalyParams())
    frame = very_late_row().reindex(columns=amount_anomaly._CARRIED)
    assert list(per_bucket((7,), iter([frame]), state)) == []     # no history: no alert
    assert state.getCurrentWatermarkMs() < state._timeout_timestamp


def test_ml_score_customer_features_keep_running_on_a_row_far_behind_the_watermark():
    state = fresh_state()
    frame = very_late_row().reindex(columns=spark_features.CARRIED + ["amount"])
    out = list(spark_features._streaming_function(("cust",), iter([frame]), state))
    assert len(out) == 1 and len(out[0]) == 1
    assert state.getCurrentWatermarkMs() < state._timeout_timestamp


def test_without_the_guard_spark_would_fail_the_query():
    """What ``timeout_after`` prevents: PySpark refuses a timeout behind the watermark."""
    from pyspark.errors import PySparkValueError

    with pytest.raises(PySparkValueError, match="INVALID_TIMEOUT_TIMESTAMP"):
        fresh_state().setTimeoutTimestamp(978_307_200_000)
