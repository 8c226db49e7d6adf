"""Fraud scenarios and legitimate look-alikes: names, default rates, and how each is injected.

Every scenario has one number, its *rate*, whose unit depends on the kind of scenario:

* ``per_txn``: expected incidents per ordinary transaction (an incident of ``card_testing`` is one
  burst of 5-12 charges; of the others one transaction);
* ``per_day``: new compromised terminals or cards per simulated day (an integer is exact, a fraction
  is drawn: 0.5 = one every other day on average);
* ``switch``: on when > 0.

Detectors' parameters the data is built to be separable by: double swipe gap <= 60 s; card testing
>= 5 e-commerce charges <= 5.00 within 10 min; impossible travel > 1000 km/h; amount spike >= 8x the
card's median. Ordinary traffic never trips them: a card's ordinary transactions are at least
``MIN_GAP_S`` apart, stay within ~10 km of home, and stay at or below 3x the customer's
mean amount.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from producers import geo


@dataclass(frozen=True)
class Scenario:
    name: str
    fraud: bool
    unit: str                     # per_txn, per_day or switch
    default: float                # default rate in the default profile
    handbook: float               # default rate in the handbook profile
    help: str
    handbook_ok: bool = True      # can it run on the Handbook's 100 km grid?


SCENARIOS = [
    Scenario("double_swipe", True, "per_txn", 0.002, 0.0,
             "same card, terminal and amount charged again 1-50 s later; the second is fraud"),
    Scenario("card_testing", True, "per_txn", 0.0005, 0.0,
             "burst of 5-12 distinct e-commerce charges <= 3.00, 5-40 s apart, on one card", False),
    Scenario("amount_spike", True, "per_txn", 0.001, 0.0,
             "a charge of 12-30x the customer's mean amount on a card with >= 10 prior transactions"),
    Scenario("impossible_travel", True, "per_txn", 0.001, 0.0,
             "card-present use 1500-8000 km from the previous one, at > 1250 km/h", False),
    Scenario("compromised_terminal", True, "per_day", 0.5, 2.0,
             "Handbook scenario 2: a terminal compromised for 28 days, all its transactions fraud"),
    Scenario("compromised_card", True, "per_day", 3.0, 3.0,
             "Handbook scenario 3: a card compromised for 14 days, 1/3 of its transactions x5 and fraud"),
    Scenario("amount_over_220", True, "switch", 0.0, 1.0,
             "Handbook scenario 1: every transaction above 220.00 is fraud"),
    Scenario("lookalike_same_merchant_diff_amount", False, "per_txn", 0.002, 0.0,
             "legit: same card and terminal 5-55 s later, amount differs by 1-10"),
    Scenario("lookalike_same_amount_hour_apart", False, "per_txn", 0.002, 0.0,
             "legit: same card, terminal and amount 15-60 min later"),
    Scenario("lookalike_plausible_trip", False, "per_txn", 0.0005, 0.0,
             "legit: card-present 500-2500 km away after a 250-600 km/h journey", False),
]
BY_NAME = {s.name: s for s in SCENARIOS}
# scenario codes in labels: 0 is an ordinary legitimate transaction
NAMES = ["none"] + [s.name for s in SCENARIOS]
CODE = {name: i for i, name in enumerate(NAMES)}
FRAUD_CODES = np.array([False] + [s.fraud for s in SCENARIOS])

MIN_GAP_S = 300                      # ordinary transactions of one card are at least 5 min apart
TERMINAL_COMPROMISE_DAYS = 28
CARD_COMPROMISE_DAYS = 14
HOUR_MS = 3_600_000


def default_rates(profile: str) -> dict[str, float]:
    return {s.name: (s.handbook if profile == "handbook" else s.default) for s in SCENARIOS}


def parse_rates(profile: str, settings: list[str] | None = None, disabled: list[str] | None = None,
                only: list[str] | None = None) -> dict[str, float]:
    """Rates of a run: the profile's defaults, ``--only`` names, ``NAME=RATE`` overrides, ``--no-scenario``."""
    rates = default_rates(profile)
    if only is not None:
        for name in only:
            _check(name)
        rates = {n: (r if n in only else 0.0) for n, r in rates.items()}
    for item in settings or []:
        name, sep, value = item.partition("=")
        _check(name)
        try:
            rate = float(value) if sep else 1.0
        except ValueError:
            raise ValueError(f"--scenario {item!r}: the rate must be a number") from None
        if rate < 0:
            raise ValueError(f"--scenario {item!r}: the rate must be >= 0")
        rates[name] = rate
    for name in disabled or []:
        _check(name)
        rates[name] = 0.0
    if profile == "handbook":
        bad = [n for n, r in rates.items() if r > 0 and not BY_NAME[n].handbook_ok]
        if bad:
            raise ValueError(f"scenarios {bad} need the default profile's cities and e-commerce merchants")
    return rates


def _check(name: str) -> None:
    if name not in BY_NAME:
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(BY_NAME)}")


def per_day_count(rng, rate: float) -> int:
    whole = int(rate)
    return whole + int(rng.random() < rate - whole)


# ---------------------------------------------------------------------------------------------
# Injection into one simulated day. ``day`` is a ``simulator.Day``: column arrays plus helpers.
# ---------------------------------------------------------------------------------------------

def label_rules(day, rates: dict[str, float], state) -> None:
    """The Handbook's three rules, in the Handbook's order (a later rule overrides an earlier one)."""
    w, rng = day.world, day.rng
    if rates["amount_over_220"] > 0:
        day.scen[(day.scen == 0) & (day.amount > 220)] = CODE["amount_over_220"]

    k = per_day_count(rng, rates["compromised_terminal"])
    if k:
        pool = np.flatnonzero(np.array(w.terminal_channel) == "pos") if w.profile == "default" else np.arange(w.n_terminals)
        until = day.start_ms + TERMINAL_COMPROMISE_DAYS * 24 * HOUR_MS
        for term in rng.choice(pool, size=min(k, len(pool)), replace=False):
            state.compromised_terminals[int(term)] = max(until, state.compromised_terminals.get(int(term), 0))
    if state.compromised_terminals:
        _mark_compromised(day, state.compromised_terminals, np.flatnonzero(
            np.isin(day.term, np.fromiter(state.compromised_terminals, dtype=np.int64))),
            day.term, "compromised_terminal")
        state.compromised_terminals = {t: u for t, u in state.compromised_terminals.items()
                                       if u > day.start_ms + 24 * HOUR_MS}

    k = per_day_count(rng, rates["compromised_card"])
    if k:
        until = day.start_ms + CARD_COMPROMISE_DAYS * 24 * HOUR_MS
        for card in rng.choice(w.n_cards, size=min(k, w.n_cards), replace=False):
            state.compromised_cards[int(card)] = max(until, state.compromised_cards.get(int(card), 0))
    if state.compromised_cards:
        hit = np.flatnonzero(np.isin(day.card, np.fromiter(state.compromised_cards, dtype=np.int64)))
        hit = hit[rng.random(len(hit)) < 1 / 3]
        hit = _mark_compromised(day, state.compromised_cards, hit, day.card, "compromised_card")
        day.amount[hit] = np.round(day.amount[hit] * 5, 2)
        state.compromised_cards = {c: u for c, u in state.compromised_cards.items()
                                   if u > day.start_ms + 24 * HOUR_MS}


def _mark_compromised(day, until: dict[int, int], rows: np.ndarray, column: np.ndarray, name: str):
    """Label ``rows`` whose terminal/card (``column``) is still compromised at their event time."""
    until_of = np.array([until[int(x)] for x in column[rows]], dtype=np.int64)
    rows = rows[day.t[rows] < until_of]
    day.scen[rows] = CODE[name]
    return rows


def inject(day, rates: dict[str, float], state) -> None:
    """Add or alter transactions for the per-transaction scenarios, each on its own anchors."""
    for name in ("amount_spike", "double_swipe", "lookalike_same_merchant_diff_amount",
                 "lookalike_same_amount_hour_apart", "card_testing", "impossible_travel",
                 "lookalike_plausible_trip"):
        if rates[name] > 0:
            INJECTORS[name](day, rates[name], state)


def _amount_spike(day, rate, state):
    w, rng = day.world, day.rng
    eligible = day.anchors(channels=("pos", "ecom"), min_prior=10)
    for i in day.pick(eligible, rate):
        mean = w.mean_amount[w.card_customer[day.card[i]]]
        day.amount[i] = round(float(mean * rng.uniform(12, 30)), 2)
        day.scen[i] = CODE["amount_spike"]


def _double_swipe(day, rate, state):
    rng = day.rng
    for i in day.pick(day.anchors(channels=("pos",)), rate):
        day.add(day.card[i], day.term[i], day.amount[i], day.t[i] + int(rng.integers(1_000, 50_001)),
                "double_swipe")


def _same_merchant_diff_amount(day, rate, state):
    w, rng = day.world, day.rng
    for i in day.pick(day.anchors(channels=("pos",)), rate):
        delta = round(float(rng.uniform(1, 10)), 2)
        cap = 3 * w.mean_amount[w.card_customer[day.card[i]]]
        amount = day.amount[i] + delta if day.amount[i] + delta <= cap else max(0.5, day.amount[i] - delta)
        day.add(day.card[i], day.term[i], round(float(amount), 2), day.t[i] + int(rng.integers(5_000, 55_001)),
                "lookalike_same_merchant_diff_amount")


def _same_amount_hour_apart(day, rate, state):
    rng = day.rng
    for i in day.pick(day.anchors(channels=("pos",)), rate):
        day.add(day.card[i], day.term[i], day.amount[i],
                day.t[i] + int(rng.integers(15 * 60_000, 60 * 60_000 + 1)), "lookalike_same_amount_hour_apart")


def _card_testing(day, rate, state):
    w, rng = day.world, day.rng
    for i in day.pick(day.anchors(), rate):
        n = int(rng.integers(5, 13))
        term = w.ecom_terminals[rng.integers(len(w.ecom_terminals))]
        start = day.t[i] + int(rng.integers(60_000, 120 * 60_000))
        gaps = np.cumsum(rng.integers(5_000, 40_001, n)) - 5_000  # the whole burst lasts < 8 min
        cents = rng.choice(np.arange(50, 301), size=n, replace=False)
        for gap, c in zip(gaps, cents):
            day.add(day.card[i], term, c / 100, start + int(gap), "card_testing")


def _far_terminal(day, term: int, lo_km: float, hi_km: float) -> tuple[int, float] | None:
    w, rng = day.world, day.rng
    pool = w.far_terminals
    for _ in range(50):
        cand = int(pool[rng.integers(len(pool))])
        dist = float(geo.haversine_km(w.terminal_lat[term], w.terminal_lon[term],
                                      w.terminal_lat[cand], w.terminal_lon[cand]))
        if lo_km <= dist <= hi_km:
            return cand, dist
    return None


def _impossible_travel(day, rate, state):
    """The far transaction follows its anchor by less than 0.8 x the time a 1000 km/h flight needs;
    the card's next transaction is at least dist / 700 km/h later, so the way back never alerts."""
    w, rng = day.world, day.rng
    for i in day.pick(day.anchors(channels=("pos", "atm"), min_next_gap_ms=8 * HOUR_MS), rate):
        reach_km = min(8000.0, 700 * (float(day.next_gap[i]) - 110 * 60_000) / HOUR_MS)
        found = _far_terminal(day, int(day.term[i]), 1500, reach_km)
        if found is None:
            continue
        term, dist = found
        max_dt = min(110 * 60_000, int(0.8 * dist / 1000 * HOUR_MS))
        t = day.t[i] + int(rng.integers(5 * 60_000, max_dt))
        mean = w.mean_amount[w.card_customer[day.card[i]]]
        day.add(day.card[i], term, round(float(mean * rng.uniform(0.5, 2.0)), 2), t, "impossible_travel")
        day.hold_card(day.card[i], t + int(dist / 700 * HOUR_MS))


def _plausible_trip(day, rate, state):
    w, rng = day.world, day.rng
    for i in day.pick(day.anchors(channels=("pos", "atm"), last_only=True), rate):
        found = _far_terminal(day, int(day.term[i]), 500, 2500)
        if found is None:
            continue
        term, dist = found
        t = day.t[i] + int(dist / rng.uniform(250, 600) * HOUR_MS)
        mean = w.mean_amount[w.card_customer[day.card[i]]]
        day.add(day.card[i], term, round(float(mean * rng.uniform(0.5, 2.0)), 2), t, "lookalike_plausible_trip")
        day.hold_card(day.card[i], t + int(dist / 600 * HOUR_MS))


INJECTORS = {
    "amount_spike": _amount_spike,
    "double_swipe": _double_swipe,
    "lookalike_same_merchant_diff_amount": _same_merchant_diff_amount,
    "lookalike_same_amount_hour_apart": _same_amount_hour_apart,
    "card_testing": _card_testing,
    "impossible_travel": _impossible_travel,
    "lookalike_plausible_trip": _plausible_trip,
}
