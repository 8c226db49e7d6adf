"""Parameters as data (detectors/params.py, detectors/whatif.py, common/param_records.py): what `params
set` accepts and refuses (one line each), and what a what-if prints. No broker, no Spark."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from common.contracts import ContractError, alert_id, validate_alert
from common.param_records import ParamRecord, decode_param_record
from common.settings import Settings
from detectors import double_swipe, ml_score, registry, template, velocity, whatif
from detectors.__main__ import main as detectors_cli
from detectors.params import ParamError, as_data, from_data, parse_changes, settable_fields, tuned
from tests.builders import make_alert

pytestmark = pytest.mark.unit
V = velocity.DETECTOR


def test_changes_are_read_as_the_dataclass_types():
    assert parse_changes(V, ["min_count=4", "max_amount=3.5", "channels=ecom, pos"]) == {
        "min_count": 4, "max_amount": 3.5, "channels": ("ecom", "pos")}
    assert parse_changes(ml_score.DETECTOR, ["threshold=none"]) == {"threshold": None}
    assert parse_changes(ml_score.DETECTOR, ["threshold=0.7"]) == {"threshold": 0.7}


@pytest.mark.parametrize("words, message", [
    (["min_count=1"], "velocity: min_count must be within 2 .. 1000, got 1"),
    (["min_count=4.5"], "velocity: min_count must be a whole number, got '4.5'"),
    (["max_amount=nan"], "velocity: max_amount must be finite, got nan"),
    (["max_gap_seconds=-3"], "velocity: max_gap_seconds must be within 1.0 .. 3600.0, got -3.0"),
    (["channels=ecom,web"], "velocity: channels takes pos, ecom, atm; got web"),
    (["channels=ecom,"], "velocity: channels must be comma-separated names, got 'ecom,'"),
    (["speed=3"], "velocity: 'speed' is not one of its parameters; settable: max_amount, channels, min_count, "
                  "max_gap_seconds"),
    (["min_count"], "velocity: expected NAME=VALUE, got 'min_count'"),
    (["min_count=4", "min_count=6"], "velocity: min_count given twice"),
    ([], "velocity: no change given (NAME=VALUE ...)"),
])
def test_anything_else_is_refused_with_one_line(words, message):
    with pytest.raises(ParamError) as refused:
        parse_changes(V, words)
    assert str(refused.value) == message


def test_a_loaded_model_cannot_be_set():
    with pytest.raises(ParamError, match="'artifact' cannot be set at run time"):
        parse_changes(ml_score.DETECTOR, ["artifact=x"])


@pytest.mark.parametrize("detector", [*registry.all(), template.DETECTOR], ids=lambda d: d.name)
def test_every_number_has_a_finite_range_that_holds_its_default(detector):
    for name, (field, hint) in settable_fields(detector).items():
        if hint in (str, tuple[str, ...]):
            continue                     # text: free (a model name, merchant categories) or metadata["choices"]
        low, high = field.metadata.get("range", (None, None))
        assert low is not None and high is not None and math.isfinite(low) and math.isfinite(high), \
            f"{detector.name}.{name}: give it metadata={{'range': (low, high)}}"
        default = getattr(detector.params, name)
        assert default is None or low <= default <= high, f"{detector.name}.{name}: default {default} outside the range"
        with pytest.raises(ParamError) as refused:
            parse_changes(detector, [f"{name}={high + 1}"])
        assert str(refused.value) == f"{detector.name}: {name} must be within {low} .. {high}, got {high + 1}"


def test_a_gap_past_a_java_long_in_microseconds_is_refused():
    with pytest.raises(ParamError) as refused:          # 1e13 s = 1e19 us: the pair operator's long overflows
        parse_changes(double_swipe.DETECTOR, ["max_gap_seconds=1e13"])
    assert str(refused.value) == f"double_swipe: max_gap_seconds must be within 1.0 .. 3600.0, got {1e13}"


def test_the_command_refuses_before_asking_the_broker(capsys):
    # the settings point at a port nothing listens on: a refusal must come first, on one line, exit 2
    with pytest.raises(SystemExit):
        detectors_cli(["params", "set", "velocity", "min_count=4"])          # --reason is required
    assert "--reason" in capsys.readouterr().err
    from common.cli_errors import run_command
    code = run_command(lambda: detectors_cli(["params", "set", "velocity", "min_count=0", "--reason", "r"]),
                       "python -m detectors")
    err = capsys.readouterr().err
    assert code == 2 and err == "python -m detectors: error: velocity: min_count must be within 2 .. 1000, got 0\n"


def test_a_record_round_trips_and_sets_the_version():
    data = as_data(V.with_params(min_count=3, channels=("ecom", "pos")))
    assert data["channels"] == ["ecom", "pos"]
    record = ParamRecord("velocity", data, 2, V.version, "ana", "slower testers", "2026-11-26T10:00:00.000Z")
    assert decode_param_record(record.to_json()) == record
    running = tuned(V, record)
    assert running.params == dataclasses.replace(V.params, min_count=3, channels=("ecom", "pos"))
    assert running.params_version == 2 and tuned(V, None) is V
    with pytest.raises(ParamError, match="the record sets speed, which the code no longer has"):
        from_data(V, {**data, "speed": 1})


@pytest.mark.parametrize("raw, message", [
    (None, "tombstone"), (b"[1]", "not a JSON object"), (b'{"detector": "v"}', "misses"),
    (json.dumps({"detector": "v", "params": {}, "version": 0, "detector_version": "1", "author": "a",
                 "reason": "r", "set_at": "x"}).encode(), "version must be a whole number >= 1"),
])
def test_records_that_are_not_parameter_sets_are_refused(raw, message):
    with pytest.raises(ContractError, match=message):
        decode_param_record(raw)


def test_alerts_may_carry_the_parameters_version():
    alert = make_alert("card-1", ["t1", "t2"])
    assert validate_alert({**alert, "params_version": 3})["params_version"] == 3
    with pytest.raises(ContractError, match="params_version"):
        validate_alert({**alert, "params_version": "3"})


def _alert(card: str, txn_ids: list[str], event_time: str) -> dict:
    return {"alert_id": alert_id("velocity", txn_ids), "detector": "velocity", "card_id": card,
            "txn_ids": txn_ids, "event_time": event_time}


def test_the_what_if_compares_both_sides_per_scenario_and_lists_what_appears_and_disappears():
    labels = {**{f"a{i}": {"txn_id": f"a{i}", "is_fraud": True, "scenario": "card_testing"} for i in range(5)},
              **{f"b{i}": {"txn_id": f"b{i}", "is_fraud": True, "scenario": "card_testing"} for i in range(4)}}
    burst_a = _alert("card-a", [f"a{i}" for i in range(5)], "2026-11-22T10:02:00.000Z")
    burst_b = _alert("card-b", [f"b{i}" for i in range(4)], "2026-11-22T10:03:00.000Z")
    noise = _alert("card-c", ["c0", "c1", "c2", "c3"], "2026-11-22T10:04:00.000Z")   # not fraud
    result = whatif.compare(V, V.with_params(min_count=4), [burst_a], [burst_a, burst_b, noise], labels)
    assert result["changes"] == {"min_count": [5, 4]}
    assert result["scenarios"] == {
        "card_testing": {"current": {"alerts": 1, "precision": 1.0, "recall": 0.5556},
                         "proposed": {"alerts": 2, "precision": 1.0, "recall": 1.0}},
        "legitimate": {"current": {"alerts": 0, "precision": None, "recall": None},
                       "proposed": {"alerts": 1, "precision": 0.0, "recall": None}}}
    assert result["totals"] == {"current": {"alerts": 1, "precision": 1.0, "recall": 0.5556},
                                "proposed": {"alerts": 3, "precision": 0.6667, "recall": 1.0}}
    assert [a["card_id"] for a in result["appear"]] == ["card-b", "card-c"] and result["disappear"] == []
    text = whatif.render(result)
    assert text.splitlines()[0] == "what-if velocity: min_count 5 -> 4 (current parameters: version 0)"
    assert "card_testing                    1         2          1.000     1.000       0.556     1.000" in text
    assert "all                             1         3          1.000     0.667       0.556     1.000" in text
    assert "2 alerts appear:" in text and "0 alerts disappear" in text
    assert "card-c  legitimate" in text


def test_set_checked_finds_only_a_what_if_of_the_very_same_change(tmp_path):
    settings = Settings.from_env({"run_dir": tmp_path})
    proposed = V.with_params(min_count=4)
    result = whatif.compare(V, proposed, [], [], {})
    whatif.save(settings, result, "a file")
    assert whatif.matching(settings, "velocity", 0, as_data(proposed))["source"] == "a file"
    assert whatif.matching(settings, "velocity", 0, as_data(V.with_params(min_count=3))) is None
    assert whatif.matching(settings, "velocity", 1, as_data(proposed)) is None     # the base moved on
