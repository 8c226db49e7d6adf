"""Which detectors share a query (spark_job.options.plan_queries): names are checkpoints and writer ids."""

from __future__ import annotations

import pytest

from common.cli_errors import UserError
from spark_job.options import RunOptions, parse_group_triggers, parse_groups, plan_queries

pytestmark = pytest.mark.unit

GROUPS = parse_groups("rules=a,b,c; ml=m")


def names(detectors, **options):
    return [(plan.name, plan.detectors, plan.with_dlq) for plan in plan_queries(detectors, RunOptions(**options))]


def test_groups_share_a_query_and_the_first_carries_the_dead_letters():
    assert names(["a", "b", "c", "m", "x"], groups=GROUPS) == [
        ("detectors-rules", ("a", "b", "c"), True), ("detectors-ml", ("m",), False), ("detector-x", ("x",), False)]


def test_one_detector_of_a_group_runs_as_it_would_alone_and_part_of_a_group_is_a_query_of_its_own():
    assert names(["a"], groups=GROUPS) == [("detector-a", ("a",), False), ("dlq", (), True)]
    assert names(["a", "b"], groups=GROUPS) == [("detectors-rules-a-b", ("a", "b"), True)]


def test_without_groups_one_query_per_detector_or_one_shared():
    assert names(["a", "b"]) == [("detector-a", ("a",), False), ("detector-b", ("b",), False), ("dlq", (), True)]
    assert names(["a", "b"], shared=True) == [("detectors-shared", ("a", "b"), True)]
    assert names(["a"], groups=GROUPS, with_dlq=False) == [("detector-a", ("a",), False)]


@pytest.mark.parametrize("spec", ["rules", "rules=", "=a", "9x=a", "r=a;s=a,b"])
def test_a_spec_that_makes_no_sense_is_one_line(spec):
    with pytest.raises(UserError):
        parse_groups(spec)


def test_the_batch_bound_comes_from_the_settings_unless_the_command_line_names_one():
    import argparse

    from spark_job.options import add_arguments, from_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    groups = "rules=double_swipe"
    assert from_arguments(parser.parse_args([]), groups, 20_000).max_offsets_per_trigger == 20_000
    assert from_arguments(parser.parse_args(["--max-offsets-per-trigger", "5000"]), groups,
                          20_000).max_offsets_per_trigger == 5_000


def test_a_group_can_have_a_processing_time_trigger_and_the_other_queries_the_jobs():
    triggers = parse_group_triggers("ml=3")
    plans = plan_queries(["a", "b", "c", "m", "x"], RunOptions(groups=GROUPS, group_triggers=triggers,
                                                                trigger_seconds=0.5))
    assert [(p.name, p.trigger_seconds) for p in plans] == [
        ("detectors-rules", 0.5), ("detectors-ml", 3.0), ("detector-x", 0.5)]
    assert all(p.trigger_seconds == 0 for p in plan_queries(["a", "m"], RunOptions(group_triggers=triggers)))
    assert parse_group_triggers("") == () and parse_group_triggers("ml=2.5; rules=0") == (("ml", 2.5), ("rules", 0.0))


@pytest.mark.parametrize("spec", ["ml", "ml=", "ml=soon", "ml=-1", "=3"])
def test_a_trigger_spec_that_makes_no_sense_is_one_line(spec):
    with pytest.raises(UserError, match="group triggers"):
        parse_group_triggers(spec)
