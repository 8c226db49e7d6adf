"""``make bench ONLY=demo``'s table: each detector's p99, and in brackets its p99 once the JVM is warm."""

from __future__ import annotations

from bench.demo_latency import figures, latency_cell, markdown


def test_a_cell_gives_the_whole_run_and_the_second_half():
    report = {"transactions": 60_000, "duration_s": 60,
              "latency_by_detector": {"double_swipe": {"p50": 12.3, "p99": 18.6, "second_half_p99": 16.5,
                                                       "count": 139, "target_p99_s": 2}},
              "consumer_lag": {"max_first_half": 1, "max_second_half": 2},
              "seconds_from_last_transaction_to_last_alert": 4.7, "quality": {"detectors": {}}}
    point = figures(report)
    assert latency_cell(point["latency_by_detector"]["double_swipe"]) == "18.6 (16.5)"
    row = markdown({"1000": {"groups": point}})[-2]
    assert row.startswith("| 1,000 | groups | 18.6 (16.5) | – |")


def test_an_older_point_without_the_second_half_shows_its_p99_alone():
    assert latency_cell({"p99": 3.0}) == "3.0"
    assert latency_cell({}) == "–"


def test_variants_alternate_each_pair_in_the_other_order():
    from bench.demo_latency import run_order

    assert run_order(("local", "untuned"), 3) == [("local", 1), ("untuned", 1), ("untuned", 2), ("local", 2),
                                                  ("local", 3), ("untuned", 3)]


def test_the_untuned_variant_turns_the_local_profile_and_the_rehearsal_off():
    from bench.demo_latency import variant_run
    from common.settings import Settings

    env, extra = variant_run("untuned")
    assert extra == ["--warmup", "0"]
    assert Settings.from_env(environ={**env, "FRAUD_SPARK_MASTER": "local[2]"}).active_profile == "cluster"
    assert Settings.from_env(environ=variant_run("local")[0]).active_profile == "local"
