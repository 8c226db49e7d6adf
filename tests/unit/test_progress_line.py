"""The detector job's log line per batch says where the batch's time went (spark_job/progress.py)."""

from __future__ import annotations

import logging

from spark_job.progress import ProgressListener, phases_text, summarize_progress

EVENT = {
    "name": "detectors-rules", "batchId": 7, "numInputRows": 120,
    "durationMs": {"triggerExecution": 900, "addBatch": 640, "queryPlanning": 120, "walCommit": 41,
                   "commitOffsets": 38, "latestOffset": 12, "getBatch": 0},
    "stateOperators": [{"operatorName": "flatMapGroupsWithState", "numRowsTotal": 10, "allUpdatesTimeMs": 12,
                        "commitTimeMs": 9},
                       {"operatorName": "flatMapGroupsWithState", "numRowsTotal": 4, "allUpdatesTimeMs": 3,
                        "commitTimeMs": 5}],
}


def test_phases_longest_first_then_the_state_operators():
    assert phases_text(summarize_progress(EVENT)) == ("addBatch 640, queryPlanning 120, walCommit 41, commitOffsets 38, "
                                                      "latestOffset 12, state updates 15 commit 14")


def test_a_batch_without_state_or_phases():
    assert phases_text(summarize_progress({"name": "q", "batchId": 1, "numInputRows": 1})) == ""


def test_the_batch_line_carries_the_phases(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="spark_job.progress")
    ProgressListener(tmp_path).record(EVENT)
    assert "detectors-rules batch 7: 120 rows" in caplog.text
    assert "900 ms (addBatch 640, queryPlanning 120" in caplog.text
