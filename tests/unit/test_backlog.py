"""What a detector query's batch read, or its first batch will read, from its checkpoint (spark_job.tuning.backlog)."""

from __future__ import annotations

import json

import pytest

from spark_job.tuning.backlog import batch_rows, planned_again, records_between

pytestmark = pytest.mark.unit

TOPIC = "t.transactions"


def offsets(**partitions: int) -> list:
    """One batch's end offsets as Spark writes them: the same topic once per source (branch) of the plan."""
    source = {TOPIC: {p.lstrip("p"): n for p, n in partitions.items()}}
    return [source, source, source]


def write_batch(checkpoint, batch_id: int, end: list, committed: bool) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0})] + [json.dumps(source) for source in end]
    (checkpoint / "offsets" / str(batch_id)).write_text("\n".join(lines))
    if committed:
        (checkpoint / "commits" / str(batch_id)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_records_between_counts_one_source_not_each_branch_of_the_plan():
    assert records_between(offsets(p0=10, p1=5), offsets(p0=110, p1=55)) == 150
    assert records_between(offsets(p0=10), offsets(p0=10, p1=7)) == 7      # a partition added since
    assert records_between(None, offsets(p0=1)) is None
    assert records_between([None], [None]) is None


def test_the_batch_a_killed_job_had_planned_is_run_again_first(tmp_path):
    write_batch(tmp_path, 0, offsets(p0=100, p1=100), committed=True)
    write_batch(tmp_path, 1, offsets(p0=120, p1=130), committed=True)
    assert planned_again(tmp_path) is None                        # every planned batch committed
    write_batch(tmp_path, 2, offsets(p0=20_120, p1=30_130), committed=False)
    assert planned_again(tmp_path) == 50_000
    assert planned_again(tmp_path / "nowhere") is None
    assert planned_again("s3a://bucket/checkpoints/q") is None    # not local: not read


def test_a_first_batch_that_was_never_committed_has_no_start_to_count_from(tmp_path):
    write_batch(tmp_path, 0, offsets(p0=500), committed=False)
    assert planned_again(tmp_path) is None


def test_a_batch_read_what_lies_between_its_end_offsets_and_the_batch_befores(tmp_path):
    write_batch(tmp_path, 0, offsets(p0=100, p1=100), committed=True)
    write_batch(tmp_path, 1, offsets(p0=25_100, p1=100), committed=False)    # planned, still running
    assert batch_rows(tmp_path, 1) == 25_000
    assert batch_rows(tmp_path, 0) is None                        # a first batch without its sources' start
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_text("\0v1\n" + json.dumps({TOPIC: {"0": 40, "1": 100}}))
    assert batch_rows(tmp_path, 0) == 60                          # from where the query started
    assert batch_rows(tmp_path, 7) is None                        # not in the checkpoint
    assert batch_rows("s3a://bucket/checkpoints/q", 1) is None
