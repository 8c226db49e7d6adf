"""A detector added to a group whose checkpoint was started without it: one line saying what to do."""

from __future__ import annotations

import pytest

from common.cli_errors import UserError
from spark_job import checkpoint_members

pytestmark = pytest.mark.unit


def test_the_same_detectors_in_any_order_fit():
    assert checkpoint_members.mismatch("q", ["a", "b"], ["b", "a"], "/c") is None


def test_an_added_detector_is_named_with_what_to_do():
    problem = checkpoint_members.mismatch("detectors-rules", ["double_swipe", "velocity"],
                                          ["double_swipe", "velocity", "cash_out"], "/ckpt/detectors-rules")
    assert "cash_out added" in problem and "/ckpt/detectors-rules" in problem
    assert "group of its own" in problem and "\n" not in problem


def test_the_first_start_records_the_detectors_and_a_later_one_compares(tmp_path):
    checkpoint = str(tmp_path / "detectors-rules")
    checkpoint_members.check("detectors-rules", ["velocity", "double_swipe"], checkpoint)
    checkpoint_members.check("detectors-rules", ["double_swipe", "velocity"], checkpoint)     # a restart
    with pytest.raises(UserError, match="cash_out added"):
        checkpoint_members.check("detectors-rules", ["double_swipe", "velocity", "cash_out"], checkpoint)
    with pytest.raises(UserError, match="velocity taken out"):
        checkpoint_members.check("detectors-rules", ["double_swipe"], checkpoint)


def test_a_checkpoint_from_before_the_record_is_left_alone(tmp_path):
    folder = tmp_path / "detectors-rules"
    (folder / "offsets").mkdir(parents=True)
    (folder / "offsets" / "0").write_text("v1")
    checkpoint_members.check("detectors-rules", ["a"], str(folder))
    assert not (folder / checkpoint_members.FILE).exists()


def test_a_remote_checkpoint_is_not_read(tmp_path):
    checkpoint_members.check("q", ["a"], "hdfs://nn/ckpt/q")       # nothing to open, nothing raised
