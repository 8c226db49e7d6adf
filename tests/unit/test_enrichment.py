"""sinks.enrichment: pure enrichment of an alert with its profiles."""

import json
from datetime import datetime, timezone

import pytest

from common.contracts import ALERT_TRIGGER_FIELDS, ContractError
from sinks.enrichment import decode_alert, enrich, haversine_km
from tests.builders import make_alert

NOW = datetime(2026, 11, 22, 10, 5, tzinfo=timezone.utc)
CUSTOMER = {"segment": "premium", "home_lat": "52.52", "home_lon": "13.405", "mean_amount": "40"}
CARD = {"customer_id": "cu1", "issued": "2024-01-01", "status": "active"}
MERCHANT = {"name": "Corner Bakery", "mcc": "5462", "category": "bakery", "lat": "48.8566",
            "lon": "2.3522"}


def test_haversine_known_distances():
    assert haversine_km(0, 0, 0, 0) == 0
    assert haversine_km(52.52, 13.405, 48.8566, 2.3522) == pytest.approx(878, abs=2)   # Berlin-Paris
    assert haversine_km(0, 0, 0, 180) == pytest.approx(20015, abs=5)                 # half the equator


def test_full_context():
    alert = make_alert("ca1", ["t1", "t2"], merchant_id="m1")
    out = enrich(alert, CUSTOMER, CARD, MERCHANT, 3, NOW)
    for name, value in alert.items():
        assert out[name] == value                   # the alert itself is unchanged
    e = out["enrichment"]
    assert e["customer_id"] == "cu1" and e["segment"] == "premium" and e["card_status"] == "active"
    assert (e["home_lat"], e["home_lon"]) == (52.52, 13.405)
    assert (e["merchant_id"], e["merchant_name"], e["merchant_category"], e["mcc"]) == \
        ("m1", "Corner Bakery", "bakery", "5462")
    assert e["location_source"] == "merchant"
    assert e["distance_from_home_km"] == pytest.approx(878, abs=2)
    assert e["card_recent_alerts"] == 3 and e["recent_window_hours"] == 24
    assert out["profile_missing"] == []
    assert out["enriched_at"] == "2026-11-22T10:05:00.000Z"


def test_terminal_location_wins_over_the_merchant_profile():
    alert = make_alert("ca1", ["t1"], merchant_id="m1", lat=52.52, lon=13.405)
    out = enrich(alert, CUSTOMER, CARD, MERCHANT, 1, NOW)
    assert out["enrichment"]["location_source"] == "terminal"
    assert out["enrichment"]["distance_from_home_km"] == 0


@pytest.mark.parametrize("customer,card,merchant,missing", [
    (None, CARD, MERCHANT, ["customer"]),
    (CUSTOMER, {}, MERCHANT, ["card"]),
    (CUSTOMER, CARD, None, ["merchant"]),
    (None, None, None, ["card", "customer", "merchant"]),
])
def test_a_missing_profile_is_marked_never_dropped(customer, card, merchant, missing):
    out = enrich(make_alert("ca1", ["t1"], merchant_id="m1"), customer, card, merchant, 1, NOW)
    assert out["profile_missing"] == missing
    assert out["alert_id"]
    if "customer" in missing or "merchant" in missing:
        assert out["enrichment"]["distance_from_home_km"] is None


def test_ecommerce_merchant_without_location_has_no_distance():
    merchant = dict(MERCHANT, lat="", lon="")
    out = enrich(make_alert("ca1", ["t1"], merchant_id="m1"), CUSTOMER, CARD, merchant, 1, NOW)
    assert out["enrichment"]["location_source"] is None
    assert out["enrichment"]["distance_from_home_km"] is None
    assert out["enrichment"]["merchant_name"] == "Corner Bakery"


def test_alert_customer_id_overrides_card_profile_and_garbage_coordinates_are_unknown():
    alert = make_alert("ca1", ["t1"], customer_id="cu9")
    out = enrich(alert, dict(CUSTOMER, home_lat="north", home_lon="999"), CARD, None, 0, NOW)
    assert out["enrichment"]["customer_id"] == "cu9"
    assert out["enrichment"]["home_lat"] is None
    assert out["enrichment"]["merchant_id"] is None


# --- the alert's trigger context (merchant, terminal, ... of the triggering transaction) ---------

TRIGGER = {"customer_id": "cu1", "merchant_id": "m1", "terminal_id": "term-m1", "amount": 42.5,
           "currency": "EUR", "channel": "pos", "lat": 48.8566, "lon": 2.3522}


def test_alert_with_trigger_context_gets_the_merchant_from_its_merchant_id():
    alert = make_alert("ca1", ["t1", "t2"], **TRIGGER)
    decoded = decode_alert(json.dumps(alert))           # the contract accepts the optional fields
    out = enrich(decoded, CUSTOMER, CARD, MERCHANT, 1, NOW)
    e = out["enrichment"]
    assert (e["merchant_id"], e["merchant_name"], e["merchant_category"]) == ("m1", "Corner Bakery", "bakery")
    assert e["customer_id"] == "cu1" and e["location_source"] == "terminal"
    assert out["profile_missing"] == []
    assert {name: out[name] for name in TRIGGER} == TRIGGER     # the trigger context is passed on


def test_alert_naming_an_unknown_merchant_is_kept_with_the_merchant_marked_missing():
    out = enrich(decode_alert(make_alert("ca1", ["t1"], **TRIGGER)), CUSTOMER, CARD, {}, 1, NOW)
    assert out["profile_missing"] == ["merchant"]
    assert out["enrichment"]["merchant_id"] == "m1" and out["enrichment"]["merchant_name"] is None


def test_alert_of_an_older_writer_without_trigger_context_is_still_enriched():
    alert = make_alert("ca1", ["t1"])
    assert not set(ALERT_TRIGGER_FIELDS) & set(alert)
    out = enrich(decode_alert(json.dumps(alert)), CUSTOMER, CARD, None, 2, NOW)
    assert out["profile_missing"] == ["merchant"]
    e = out["enrichment"]
    assert e["merchant_id"] is None and e["merchant_name"] is None and e["location_source"] is None
    assert e["customer_id"] == "cu1" and e["segment"] == "premium" and e["card_recent_alerts"] == 2


def test_a_trigger_without_location_falls_back_to_the_merchant_profile():
    alert = make_alert("ca1", ["t1"], **dict(TRIGGER, channel="ecom", lat=None, lon=None))
    out = enrich(decode_alert(alert), CUSTOMER, CARD, MERCHANT, 1, NOW)
    assert out["enrichment"]["location_source"] == "merchant"


@pytest.mark.parametrize("name,value", [("merchant_id", 7), ("amount", "42.50"), ("lat", True),
                                        ("channel", ["pos"])])
def test_trigger_fields_of_the_wrong_type_break_the_contract(name, value):
    with pytest.raises(ContractError, match=name):
        decode_alert(make_alert("ca1", ["t1"], **dict(TRIGGER, **{name: value})))
