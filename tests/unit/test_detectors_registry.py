"""Registry, parameters and the `list` command: pure Python, no JVM."""

from __future__ import annotations

import dataclasses
import json

import pytest

from detectors import __main__ as cli
from detectors import registry


def test_registry_lists_the_built_ins_in_order():
    # built-ins first, then any added by `make new-detector`
    assert registry.names()[:5] == ["double_swipe", "impossible_travel", "amount_anomaly", "ml_score", "velocity"]
    assert [d.name for d in registry.all()] == registry.names()
    assert all(registry.get(name).name == name for name in registry.names())


def test_unknown_detector_names_the_registered_ones():
    with pytest.raises(KeyError, match="registered: double_swipe"):
        registry.get("nope")


def test_resolve_defaults_to_all_and_keeps_order():
    assert registry.resolve([]) == registry.all()
    assert [d.name for d in registry.resolve(["velocity", "double_swipe", "velocity"])] == ["velocity", "double_swipe"]


def test_the_shared_query_takes_detectors_in_registry_order_and_unregistered_ones_last():
    custom = dataclasses.replace(registry.get("velocity"), name="big_amount")
    named = [registry.get("velocity"), custom, registry.get("double_swipe"), registry.get("impossible_travel")]
    assert [d.name for d in registry.in_registry_order(named)] == [
        "double_swipe", "impossible_travel", "velocity", "big_amount"]


@pytest.mark.parametrize("detector", registry.all(), ids=lambda d: d.name)
def test_params_are_frozen_typed_and_documented(detector):
    params = detector.params
    assert dataclasses.is_dataclass(params) and params.__dataclass_params__.frozen
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(params, dataclasses.fields(params)[0].name, 1)
    for f in dataclasses.fields(params):
        assert f.type, f"{f.name} has no type"
    changed = detector.with_params(**{dataclasses.fields(params)[0].name: getattr(params, dataclasses.fields(params)[0].name)})
    assert changed.params == params and changed is not detector


def test_list_command_shows_name_version_watermark_scenarios_and_params(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for detector in registry.all():
        assert f"{detector.name} {detector.version}" in out
        assert f"watermark={detector.watermark}" in out
        for key in detector.describe_params():
            assert f"{key} = " in out
    assert "min_count = 5" in out and "scenarios=card_testing" in out


def test_list_json(capsys):
    assert cli.main(["list", "--json", "velocity"]) == 0
    [entry] = json.loads(capsys.readouterr().out)
    assert entry["name"] == "velocity" and entry["params"]["min_count"] == 5 and entry["scenarios"] == ["card_testing"]


def test_run_hands_over_to_the_job_without_importing_it(monkeypatch):
    import os
    import sys

    calls = []
    monkeypatch.setattr(os, "execv", lambda path, argv: calls.append((path, argv)))
    cli.main(["run", "velocity", "--shared"])
    assert calls == [(sys.executable, [sys.executable, "-m", "spark_job", "--prog=python -m detectors run",
                                       "velocity", "--shared"])]


def test_the_job_rejects_unknown_names_before_importing_the_runner():
    from spark_job import __main__ as job_cli

    with pytest.raises(KeyError):
        job_cli.main(["nope"])


def test_the_job_runs_with_every_option(monkeypatch):
    import spark_job.job
    from spark_job import __main__ as job_cli

    calls = []
    monkeypatch.setattr(spark_job.job, "run", lambda names, args: calls.append((names, args)) or 0)
    assert job_cli.main(["velocity", "--max-offsets-per-trigger", "1000", "--shared"]) == 0
    [(names, args)] = calls
    assert names == ["velocity"] and args.max_offsets_per_trigger == 1000 and args.shared


def test_run_without_a_trained_model_says_to_run_make_train(monkeypatch, tmp_path, capsys):
    from common.settings import get_settings

    from spark_job import __main__ as job_cli

    monkeypatch.setenv("FRAUD_MODEL_REGISTRY", str(tmp_path / "empty-registry"))
    get_settings.cache_clear()
    try:
        assert job_cli.main([]) == 2                       # every detector: ml_score has no model
        assert "ml_score: no model to score with" in capsys.readouterr().err
        assert registry.problems([registry.get("velocity")]) == []
        assert job_cli.main(["ml_score"]) == 2
        assert "run `make train`" in capsys.readouterr().err
    finally:
        get_settings.cache_clear()


def test_watermark_delays_read_as_durations():
    from datetime import timedelta

    assert registry.get("double_swipe").watermark_delay == timedelta(minutes=2)
    assert registry.get("impossible_travel").watermark_delay == timedelta(minutes=10)
    assert all(d.watermark_delay > timedelta(0) for d in registry.all())
