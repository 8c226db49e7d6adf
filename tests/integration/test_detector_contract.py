"""The contract every registered detector must keep (river's test_estimators.py is the model).

Each test is parametrized over ``registry.all()``: registering a detector puts it through all of them.
One streaming run per detector (a long stream: five micro-batches 31 days of event time apart, each with
every fraud pattern and look-alike on fresh cards, then a watermark tick) is shared by the checks below.
Detectors that need a trained model (``ml_score``) get a tiny one trained for this module
(``model_registry`` in ``tests/integration/conftest.py``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from pyspark.sql.types import ArrayType, MapType, StructType

from common.contracts import alert_id, parse_event_time
from detectors import harness, registry, samples
from detectors.base import ALERT_SCHEMA, TRIGGER_COLUMNS
from producers.scenarios import SCENARIOS

pytestmark = pytest.mark.usefixtures("model_registry")

DETECTORS = registry.all()
BATCHES = 5
SPACING = timedelta(days=31)     # longer than any built-in detector's state horizon (amount_anomaly: 30 days)


def _shifted(txns: list[dict], suffix: str, by: timedelta) -> list[dict]:
    out = []
    for t in txns:
        t = dict(t, txn_id=f"{t['txn_id']}-{suffix}", card_id=f"{t['card_id']}-{suffix}")
        t["event_time"] = harness.format_event_time(parse_event_time(t["event_time"]) + by)
        # when it "entered Kafka": any moment of its own, to see it carried onto the alert
        t["ingested_at"] = harness.format_event_time(parse_event_time(t["event_time"]) + timedelta(seconds=1))
        out.append(t)
    return out


def _long_stream() -> list[list[dict]]:
    base = samples.representative()
    batches = [_shifted(base, f"b{k}", k * SPACING) for k in range(BATCHES)]
    return batches + [[harness.watermark_tick(samples.T0 + BATCHES * SPACING)]]


LONG_STREAM = _long_stream()
ALL_TXNS = [t for batch in LONG_STREAM for t in batch]


@pytest.fixture(scope="module")
def streamed(spark, tmp_path_factory):
    cache: dict[str, harness.HarnessResult] = {}

    def get(detector):
        if detector.name not in cache:
            checkpoint = tmp_path_factory.mktemp(f"contract-{detector.name}")
            cache[detector.name] = harness.run_microbatches(detector, LONG_STREAM, spark, checkpoint)
        return cache[detector.name]

    return get


@pytest.fixture(scope="module")
def static(spark):
    cache: dict[str, list[dict]] = {}

    def get(detector):
        if detector.name not in cache:
            cache[detector.name] = harness.run_static(detector, ALL_TXNS, spark)
        return cache[detector.name]

    return get


def _without_nullability(kind):
    if isinstance(kind, StructType):
        return [(f.name, _without_nullability(f.dataType)) for f in kind.fields]
    if isinstance(kind, ArrayType):
        return ("array", _without_nullability(kind.elementType))
    if isinstance(kind, MapType):
        return ("map", _without_nullability(kind.keyType), _without_nullability(kind.valueType))
    return kind.simpleString()


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.name)
def test_declaration(detector):
    assert detector.name and detector.version and detector.description
    assert detector.watermark.split()[0].isdigit(), "watermark is a delay such as '2 minutes'"
    assert detector.params.__dataclass_params__.frozen, "params must be a frozen dataclass"
    assert detector.scenarios, "name the simulator scenario(s) the detector is meant to catch"
    known = [s.name for s in SCENARIOS if s.fraud]
    unknown = [name for name in detector.scenarios if name not in known]
    assert not unknown, (f"{detector.name} declares {', '.join(unknown)}, not a fraud scenario of the simulator "
                         f"(producers/scenarios.py): {', '.join(known)}")


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.name)
def test_output_schema_is_the_alert_schema(spark, detector):
    frame = harness.transactions_frame(spark, samples.representative())
    schema = detector.run(frame).schema
    assert [f.name for f in schema.fields] == [f.name for f in ALERT_SCHEMA.fields]
    assert _without_nullability(schema) == _without_nullability(ALERT_SCHEMA)


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.name)
def test_no_alerts_for_empty_input(spark, detector):
    assert harness.run_static(detector, [], spark) == []


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.name)
def test_alerts_are_well_formed_and_ids_deterministic(spark, detector, static):
    found = static(detector)
    assert found, "the representative input contains every pattern: each detector must fire on it"
    by_id = {t["txn_id"]: t for t in ALL_TXNS}
    for alert in found:
        assert alert["alert_id"] == alert_id(detector.name, alert["txn_ids"])
        assert alert["detector"] == detector.name and alert["detector_version"] == detector.version
        assert 0.0 <= alert["score"] <= 1.0
        assert alert["reason"] and all(isinstance(v, float) for v in alert["evidence"].values())
        times = {t["txn_id"]: t["event_time"] for t in ALL_TXNS}
        assert [times[i] for i in alert["txn_ids"]] == sorted(times[i] for i in alert["txn_ids"]), \
            "txn_ids oldest first"
        assert alert["event_time"] == times[alert["txn_ids"][-1]], "event_time of the triggering txn"
        trigger = by_id[alert["txn_ids"][-1]]
        assert {n: alert[n] for n in TRIGGER_COLUMNS} == {n: trigger[n] for n in TRIGGER_COLUMNS}, \
            "merchant, terminal, amount... of the triggering txn (alerts(..., trigger=...))"
    again = harness.run_static(detector, list(reversed(ALL_TXNS)), spark)
    assert [a["alert_id"] for a in again] == [a["alert_id"] for a in found]


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.name)
def test_static_and_streaming_paths_agree(detector, static, streamed):
    result = streamed(detector)
    assert result.alerts == static(detector)
    assert len({a["alert_id"] for a in result.alerts}) == len(result.alerts), "no alert emitted twice"


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.name)
def test_state_is_bounded(detector, streamed):
    result = streamed(detector)
    state = result.state_rows()[:-1]          # after each data batch (and its data-free batch); tick excluded
    half = len(state) // 2
    assert max(state[half:]) <= max(state[:half]), f"state keeps growing: {state}"
    assert state[-1] <= 0.25 * len(ALL_TXNS), f"state not evicted: {state} for {len(ALL_TXNS)} rows"


@pytest.mark.parametrize("detector", DETECTORS, ids=lambda d: d.name)
def test_watermark_advances_by_a_data_free_batch(detector, streamed):
    """After each data batch the harness lets Spark run its data-free batch: the watermark moves."""
    result = streamed(detector)
    if not any(p.raw.get("stateOperators") for p in result.progress):
        # Stateless (the template): no state for the watermark to close, so Spark runs no data-free batch.
        marks = result.watermarks()[:BATCHES]
        assert all(a < b for a, b in zip(marks, marks[1:])), f"the watermark did not advance: {marks}"
        return
    for index in range(1, BATCHES):
        runs = result.batch_progress(index)
        assert runs[0].has_data and runs[0].num_input_rows > 0
        assert any(not p.has_data for p in runs[1:]), \
            f"no data-free batch after batch {index}: " + str([(p.batch_id, p.input_batch, p.has_data, p.watermark)
                                                              for p in result.progress])
        assert runs[-1].watermark > runs[0].watermark, "the watermark did not advance"
