"""The simulator: deterministic, in the contract, each scenario at its rate and separable by the
detectors' parameters, look-alikes legitimate, the Handbook's published parameters reproduced."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict

import numpy as np
import pytest

from common.contracts import decode_transaction, format_event_time, looks_like_pan, parse_event_time
from producers import scenarios
from producers.__main__ import main
from producers.geo import haversine_km
from producers.publish import Pacer
from producers.simulator import SimConfig, Simulator

ADDED = {"double_swipe", "card_testing", "impossible_travel", "lookalike_same_merchant_diff_amount",
         "lookalike_same_amount_hour_apart", "lookalike_plausible_trip"}


def stream(config: SimConfig, count: int):
    """(transactions in arrival order, labels) of the first ``count`` transactions."""
    txns, labels = [], []
    for batch in Simulator(config).take(count):
        txns.extend(json.loads(v) for v in batch.values)
        labels.extend(json.loads(line) for _, line in batch.label_lines())
    return txns, labels


@pytest.fixture(scope="module")
def default_run():
    return stream(SimConfig(seed=7), 300_000)


def test_the_same_seed_gives_the_same_bytes_and_another_seed_does_not():
    def raw(seed):
        return [(v, line) for b in Simulator(SimConfig(seed=seed, customers=2000)).take(20_000)
                for v, (_, line) in zip(b.values, b.label_lines())]
    assert raw(11) == raw(11)
    assert raw(11) != raw(12)


def test_a_shorter_run_is_a_prefix_of_a_longer_one():
    short = [v for b in Simulator(SimConfig(seed=3, customers=2000)).take(5_000) for v in b.values]
    long = [v for b in Simulator(SimConfig(seed=3, customers=2000)).take(15_000) for v in b.values]
    assert long[:5_000] == short


def test_every_transaction_is_in_the_contract_and_no_card_id_looks_like_a_card_number(default_run):
    txns, labels = default_run
    for txn in txns[:60_000]:          # the contract's full decoding: a prefix with every scenario is enough
        raw = json.dumps(txn).encode()
        decode_transaction(raw, key=txn["card_id"])
        assert format_event_time(parse_event_time(txn["event_time"])) == txn["event_time"]
    for txn in txns:
        assert re.fullmatch(r"card-\d{6}", txn["card_id"]) and not looks_like_pan(txn["card_id"])
        assert (txn["lat"] is None) == (txn["channel"] == "ecom")
    assert len({t["txn_id"] for t in txns}) == len(txns)
    assert [t["txn_id"] for t in txns] == [label["txn_id"] for label in labels]
    assert {t["channel"] for t in txns} == {"pos", "ecom", "atm"}


def test_each_scenario_appears_at_its_configured_rate_with_its_label(default_run):
    txns, labels = default_run
    by_scenario = Counter(label["scenario"] for label in labels)
    ordinary = len(labels) - sum(n for name, n in by_scenario.items() if name in ADDED)
    rates = scenarios.default_rates("default")
    bursts = _card_testing_bursts(txns, labels)
    for name in ("double_swipe", "impossible_travel", "lookalike_same_merchant_diff_amount",
                 "lookalike_same_amount_hour_apart", "lookalike_plausible_trip", "amount_spike"):
        expected = rates[name] * ordinary
        low = 0.55 if name == "amount_spike" else 0.75  # a card needs 10 prior transactions first
        assert low * expected <= by_scenario[name] <= 1.25 * expected, (name, by_scenario[name], expected)
    assert 0.7 * rates["card_testing"] * ordinary <= len(bursts) <= 1.3 * rates["card_testing"] * ordinary
    assert all(5 <= len(b) <= 12 for b in bursts)
    for label in labels:
        assert label["is_fraud"] == scenarios.BY_NAME[label["scenario"]].fraud if label["scenario"] != "none" \
            else label["is_fraud"] is False
    assert by_scenario["compromised_terminal"] > 0 and by_scenario["compromised_card"] > 0
    assert by_scenario["amount_over_220"] == 0  # the Handbook's rule is off in the default profile


def test_look_alikes_are_labelled_legitimate(default_run):
    _, labels = default_run
    lookalikes = [label for label in labels if label["scenario"].startswith("lookalike_")]
    assert len(lookalikes) > 100 and not any(label["is_fraud"] for label in lookalikes)


def test_double_swipes_and_only_they_repeat_card_merchant_and_amount_within_60_s(default_run):
    txns, labels = default_run
    scen = {label["txn_id"]: label["scenario"] for label in labels}
    last: dict[tuple, int] = {}
    flagged = set()
    for txn in sorted(txns, key=lambda t: (t["event_time"], t["txn_id"])):
        key = (txn["card_id"], txn["merchant_id"], txn["amount"])
        ms = _ms(txn)
        if key in last and ms - last[key] <= 60_000:
            flagged.add(txn["txn_id"])
        last[key] = ms
    swipes = {tid for tid, s in scen.items() if s == "double_swipe"}
    assert flagged - swipes <= {tid for tid, s in scen.items() if scenarios.BY_NAME.get(s) and
                                scenarios.BY_NAME[s].fraud}  # never on a legitimate transaction
    assert swipes <= flagged


def test_card_testing_windows_contain_only_card_testing(default_run):
    txns, labels = default_run
    scen = {label["txn_id"]: label["scenario"] for label in labels}
    small = defaultdict(list)
    for txn in txns:
        if txn["channel"] == "ecom" and txn["amount"] <= 5.00:
            small[txn["card_id"]].append((_ms(txn), txn["txn_id"]))
    for events in small.values():
        events.sort()
        for i in range(len(events) - 4):
            if events[i + 4][0] - events[i][0] <= 600_000:
                assert all(scen[tid] == "card_testing" for _, tid in events[i:i + 5])


def test_impossible_travel_and_only_it_exceeds_1000_km_per_hour(default_run):
    txns, labels = default_run
    scen = {label["txn_id"]: label["scenario"] for label in labels}
    present = defaultdict(list)
    for txn in txns:
        if txn["lat"] is not None:
            present[txn["card_id"]].append(txn)
    fast = set()
    for events in present.values():
        events.sort(key=lambda t: (t["event_time"], t["txn_id"]))
        for a, b in zip(events, events[1:]):
            km = float(haversine_km(a["lat"], a["lon"], b["lat"], b["lon"]))
            hours = (_ms(b) - _ms(a)) / 3_600_000
            if km > 1 and (hours == 0 or km / hours > 1000):
                fast.add(b["txn_id"])
    travel = {tid for tid, s in scen.items() if s == "impossible_travel"}
    assert fast == travel


def test_amount_spikes_are_fraud_and_ordinary_amounts_rarely_reach_8x_the_median(default_run):
    """The median is of the card's legitimate history: card-testing micro-charges would drag a naive
    median down, so a detector should not let them in (e.g. ignore e-commerce charges <= 5.00)."""
    txns, labels = default_run
    scen = {label["txn_id"]: label["scenario"] for label in labels}
    history = defaultdict(list)
    spikes = set()
    for txn in sorted(txns, key=lambda t: (t["event_time"], t["txn_id"])):
        past = history[txn["card_id"]]
        if len(past) >= 10 and txn["amount"] >= 8 * float(np.median(past)):
            spikes.add(txn["txn_id"])
        if scen[txn["txn_id"]] != "card_testing":
            past.append(txn["amount"])
    legit = [t for t in spikes if scen[t] not in {"amount_spike", "compromised_card"}]
    assert len(legit) <= len(txns) / 100_000, legit  # rarely: a card whose history is mostly cheap
    assert sum(scen[t] == "amount_spike" for t in spikes) >= 0.95 * sum(s == "amount_spike" for s in scen.values())


def test_arrival_is_out_of_order_by_seconds_and_late_events_by_minutes():
    config = SimConfig(seed=5, customers=3000, late_fraction=0.01)
    txns, labels = stream(config, 60_000)
    late = {label["txn_id"] for label in labels if label["late"]}
    assert 0.007 <= len(late) / len(labels) <= 0.013
    high = 0
    disorder = 0
    for txn in txns:
        ms = _ms(txn)
        if txn["txn_id"] in late:
            assert high - ms >= 60_000 or ms > high  # minutes behind what already arrived
        else:
            assert ms >= high - 3_000 - 1  # on-time events are at most the jitter out of order
            disorder += ms < high
            high = max(high, ms)
    assert disorder > 100


def test_switches_and_rates_of_the_command_line():
    rates = scenarios.parse_rates("default", ["double_swipe=0.01"], ["amount_spike"])
    assert rates["double_swipe"] == 0.01 and rates["amount_spike"] == 0
    assert set(v for k, v in scenarios.parse_rates("default", only=["card_testing"]).items()
               if k != "card_testing") == {0.0}
    with pytest.raises(ValueError, match="unknown scenario"):
        scenarios.parse_rates("default", ["nope=1"])
    with pytest.raises(ValueError, match="default profile"):
        scenarios.parse_rates("handbook", ["impossible_travel=0.001"])
    _, labels = stream(SimConfig(seed=2, customers=2000, rates=scenarios.parse_rates("default", only=[])), 20_000)
    assert {label["scenario"] for label in labels} == {"none"}


def test_the_handbook_profile_reproduces_the_published_parameters():
    sim = Simulator(SimConfig(seed=0, profile="handbook", jitter_s=0, late_fraction=0))
    w = sim.world
    assert (w.n_customers, w.n_terminals) == (5000, 10000)
    assert 5 <= w.mean_amount.min() and w.mean_amount.max() <= 100
    assert np.allclose(w.std_amount, w.mean_amount / 2)
    assert 0 <= w.txn_per_day.min() and w.txn_per_day.max() <= 4
    per_day, frauds, total = [], Counter(), 0
    for day, batch in zip(range(60), sim.batches()):
        per_day.append(len(batch))
        if day >= 30:  # compromised terminals and cards accumulate over the first 28 days
            frauds.update(scenarios.NAMES[c] for c in batch.scen.tolist() if c)
            total += len(batch)
    # the Handbook's published dataset: 1,754,155 transactions in 183 days (9,585/day), 0.84 % fraud
    assert 9_585 * 0.95 <= np.mean(per_day) <= 9_585 * 1.05
    assert 0.005 <= sum(frauds.values()) / total <= 0.012
    assert set(frauds) == {"amount_over_220", "compromised_terminal", "compromised_card"}
    first = [json.loads(v) for v in next(Simulator(sim.config).take(500)).values]
    for txn in first:
        cust = int(txn["customer_id"].split("-")[1])
        assert float(haversine_km(w.home_lat[cust], w.home_lon[cust], txn["lat"], txn["lon"])) <= 5.05
        assert txn["channel"] == "pos"


def test_simulate_out_writes_the_stream_labels_and_reference(tmp_path):
    assert main(["simulate", "--seed", "4", "--count", "3000", "--customers", "1500", "--out", str(tmp_path)]) == 0
    lines = (tmp_path / "transactions.jsonl").read_bytes().splitlines()
    expected = [v for b in Simulator(SimConfig(seed=4, customers=1500)).take(3000) for v in b.values]
    assert lines == expected
    labels = [json.loads(x) for x in (tmp_path / "labels.jsonl").read_text().splitlines()]
    assert [label["txn_id"] for label in labels] == [json.loads(x)["txn_id"] for x in lines]
    assert set(labels[0]) == {"txn_id", "is_fraud", "scenario", "late"}
    reference = json.loads((tmp_path / "reference.json").read_text())
    assert len(reference["customers"]) == 1500 and reference["config"]["seed"] == 4


def test_the_pacer_sends_in_bursts_on_a_monotonic_schedule():
    now = [0.0]
    sleeps = []

    def advance_clock(seconds):  # the fake clock: nothing waits
        sleeps.append(seconds)
        now[0] += seconds

    pacer = Pacer(10_000, clock=lambda: now[0], sleep=advance_clock)
    sent = 0
    while sent < 50_000:
        sent += min(pacer.allowance(sent), 2000)
    assert 4.9 <= now[0] <= 5.01              # 50,000 at 10,000/s take 5 s
    assert len(sleeps) <= 50_000 / 50 + 1     # bursts of >= 50 records, not a sleep per record
    assert Pacer(0).allowance(10**9) > 0      # 0 = no limit


def _card_testing_bursts(txns, labels):
    scen = {label["txn_id"]: label["scenario"] for label in labels}
    per_card = defaultdict(list)
    for txn in txns:
        if scen[txn["txn_id"]] == "card_testing":
            per_card[txn["card_id"]].append(_ms(txn))
    bursts = []
    for times in per_card.values():
        times.sort()
        current = [times[0]]
        for t in times[1:]:
            if t - current[-1] > 60_000:
                bursts.append(current)
                current = []
            current.append(t)
        bursts.append(current)
    return bursts


def _ms(txn) -> int:
    return int(parse_event_time(txn["event_time"]).timestamp() * 1000)
