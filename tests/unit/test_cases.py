"""sinks.case_logic: pure grouping of enriched alerts into cases."""

import itertools

import pytest

from sinks.case_logic import (MAX_ALERTS_PER_CASE, already_handled, apply_alert, apply_to_card, combined_score,
                              current_versions, severity_of)
from sinks.enrichment import enrich
from tests.builders import BASE_TIME, make_alert

HOUR = 3600.0


def enriched(card, txns, detector="double_swipe", merchant="Bakery", **kw):
    alert = make_alert(card, txns, detector, merchant_id="m1", **kw)
    return enrich(alert, {"segment": "mass"}, {"customer_id": "cu1"},
                  {"name": merchant, "category": "food"}, 1, BASE_TIME)


def run(alerts, state=None):
    published = []
    for alert in alerts:
        state, updates = apply_to_card(state, alert)
        published.extend(updates)
    return state, published


def test_first_alert_opens_a_case():
    case = apply_alert(None, enriched("c1", ["t1", "t2"], score=0.6, event_s=10, latency_s=2))
    assert case["status"] == "open" and case["version"] == 1 and case["card_id"] == "c1"
    assert case["alert_count"] == 1 and case["detectors"] == ["double_swipe"]
    assert case["txn_ids"] == ["t1", "t2"]
    assert case["score"] == pytest.approx(0.6) and case["severity"] == "medium"
    assert case["opened_at"] == case["updated_at"] == "2026-11-22T10:00:12.000Z"
    assert case["first_event_time"] == case["last_event_time"] == "2026-11-22T10:00:10.000Z"
    assert case["alerts"][0]["reason"] and case["merchants"] == ["Bakery"]
    assert case["segment"] == "mass" and case["customer_id"] == "cu1"


def test_several_detectors_on_the_same_transactions_make_one_case_with_all_reasons():
    a = enriched("c1", ["t1", "t2"], "double_swipe", score=0.7, reason="same amount 12 s apart")
    b = enriched("c1", ["t1", "t2"], "velocity", score=0.6, reason="2 swipes in 15 s", event_s=1)
    state, published = run([a, b])
    case = state["case"]
    assert [c["case_id"] for c in published] == [case["case_id"]] * 2
    assert case["version"] == 2 and case["alert_count"] == 2
    assert case["detectors"] == ["double_swipe", "velocity"]
    assert {x["reason"] for x in case["alerts"]} == {"same amount 12 s apart", "2 swipes in 15 s"}
    assert case["score"] == pytest.approx(1 - 0.3 * 0.4)
    assert case["severity"] == "high"


def test_one_detector_repeating_itself_does_not_inflate_the_score():
    alerts = [enriched("c1", [f"t{i}"], score=0.5, event_s=i) for i in range(5)]
    case = run(alerts)[0]["case"]
    assert case["alert_count"] == 5 and case["score"] == pytest.approx(0.5)


def test_applying_the_same_alert_twice_changes_nothing():
    a = enriched("c1", ["t1"])
    state, published = run([a])
    again, more = apply_to_card(state, a)
    assert more == [] and again == state
    assert apply_alert(state["case"], a) == state["case"]


def test_result_does_not_depend_on_arrival_order():
    alerts = [enriched("c1", [f"t{i}"], d, score=s, event_s=i * 60)
              for i, (d, s) in enumerate([("double_swipe", 0.3), ("velocity", 0.8), ("geo", 0.9)])]
    cases = []
    for order in itertools.permutations(alerts):
        case = dict(run(order)[0]["case"])
        case.pop("case_id"), case.pop("profile_missing")
        cases.append(case)
    assert all(c == cases[0] for c in cases)


def test_a_gap_over_24_hours_closes_the_case_and_opens_a_new_one():
    first = enriched("c1", ["t1"], event_s=0)
    inside = enriched("c1", ["t2"], event_s=23 * HOUR)
    later = enriched("c1", ["t3"], event_s=23 * HOUR + 24 * HOUR + 1)
    state, published = run([first, inside, later])
    assert [(c["status"], c["version"]) for c in published] == \
        [("open", 1), ("open", 2), ("closed", 3), ("open", 1)]
    closed, opened = published[2], published[3]
    assert closed["case_id"] != opened["case_id"] and closed["alert_count"] == 2
    assert closed["closed_reason"] and opened["alert_ids"] == [later["alert_id"]]
    # a redelivery of an alert of the closed case is not added to the new case ...
    assert apply_to_card(state, first) == (state, [])
    assert already_handled(state, first) and already_handled(state, later)
    # ... and what it re-sends is the card's current versions, the closing one first
    assert [(c["case_id"], c["status"], c["version"]) for c in current_versions(state)] == \
        [(closed["case_id"], "closed", 3), (opened["case_id"], "open", 1)]


def test_a_late_alert_joins_the_open_case():
    state, _ = run([enriched("c1", ["t2"], event_s=10 * HOUR), enriched("c1", ["t1"], event_s=0)])
    case = state["case"]
    assert case["alert_count"] == 2 and case["first_event_time"] == "2026-11-22T10:00:00.000Z"


def test_a_case_never_grows_past_its_size_limit():
    alerts = [enriched("c1", [f"t{i}"], event_s=i) for i in range(MAX_ALERTS_PER_CASE + 1)]
    state, published = run(alerts)
    assert published[-2]["status"] == "closed"
    assert published[-2]["alert_count"] == MAX_ALERTS_PER_CASE
    assert state["case"]["alert_count"] == 1


@pytest.mark.parametrize("score,severity", [(0.0, "low"), (0.49, "low"), (0.5, "medium"),
                                            (0.79, "medium"), (0.8, "high"), (0.95, "critical"),
                                            (1.0, "critical")])
def test_severity(score, severity):
    assert severity_of(score) == severity


def test_combined_score_is_one_minus_the_product_of_misses():
    assert combined_score([{"detector": "a", "score": 0.5}, {"detector": "b", "score": 0.5}]) == 0.75
    assert combined_score([{"detector": "a", "score": 1.0}, {"detector": "b", "score": 0.1}]) == 1.0
