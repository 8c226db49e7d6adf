"""A deterministic simulator of labelled card transactions, one simulated day at a time.

``Simulator(SimConfig(seed=...)).batches()`` yields, day after day and forever, the transactions in
*arrival* order as JSON bytes in the contract of ``common.contracts`` together with their ground truth.
The same config always gives the same bytes. A day is built in five steps:

1. ordinary transactions (``_base_default`` or the Handbook's ``_base_handbook``), daily and weekly
   seasonality, each card's ordinary transactions at least ``MIN_GAP_S`` apart;
2. the Handbook's labelling rules (amount > 220, compromised terminals and cards);
3. the per-transaction scenarios and look-alikes (``scenarios.inject``);
4. sort by event time and number the transactions (``txn-<seed>-<day>-<seq>``);
5. arrival = event time + jitter (0..``jitter_s``), plus ``late_minutes`` for a ``late_fraction``;
   what arrives before the next day starts is emitted, the rest waits for the next day's batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Iterator

import numpy as np
import pandas as pd

from producers import scenarios
from producers.scenarios import CODE, FRAUD_CODES, MIN_GAP_S, NAMES
from producers.world import World, build_world

DAY_MS = 86_400_000
HOUR_MS = 3_600_000
# share of a day's transactions per hour (UTC): quiet nights, a lunch peak and an evening peak
HOUR_WEIGHTS = np.array([0.3, 0.2, 0.15, 0.1, 0.1, 0.2, 0.6, 1.2, 2.0, 2.5, 2.8, 3.2,
                         4.0, 3.8, 3.0, 2.8, 3.0, 3.6, 4.2, 4.0, 3.2, 2.2, 1.3, 0.7])
HOUR_WEIGHTS = HOUR_WEIGHTS / HOUR_WEIGHTS.sum()
WEEKDAY_FACTOR = np.array([0.95, 0.95, 1.0, 1.0, 1.15, 1.25, 0.7])  # Monday .. Sunday
CHANNEL_CODE = {"pos": 0, "ecom": 1, "atm": 2}


@dataclass
class SimConfig:
    seed: int = 0
    profile: str = "default"                 # default or handbook
    start: datetime | None = None            # first simulated day (default: the profile's fixed date)
    customers: int | None = None             # world size (default: 10,000 / Handbook's 5,000)
    rates: dict[str, float] | None = None    # scenario rates (default: the profile's)
    jitter_s: float = 3.0                    # out-of-order arrival: up to this many seconds
    late_fraction: float = 0.005             # share of transactions that arrive minutes late
    late_minutes: tuple[float, float] = (2.0, 15.0)
    id_prefix: str = ""                      # prefixes every id, to keep parallel runs apart
    currency: str = "EUR"

    def resolved_rates(self) -> dict[str, float]:
        rates = scenarios.default_rates(self.profile)
        rates.update(self.rates or {})
        return rates


@dataclass
class Batch:
    """Transactions in arrival order; ``values`` are the JSON bytes published or written."""
    cards: np.ndarray
    values: list[bytes]
    txn_ids: list[str]
    scen: np.ndarray
    late: np.ndarray
    event_ms: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def head(self, n: int) -> "Batch":
        return Batch(self.cards[:n], self.values[:n], self.txn_ids[:n], self.scen[:n], self.late[:n],
                     self.event_ms[:n])

    def label_lines(self, sparse: bool = False, lo: int = 0, hi: int | None = None
                    ) -> Iterator[tuple[int, bytes]]:
        """(row, label JSON) per transaction of rows lo..hi; ``sparse`` skips ordinary on-time
        legitimate ones (missing = legitimate)."""
        hi = len(self) if hi is None else hi
        fraud = FRAUD_CODES[self.scen[lo:hi]]
        for i, (tid, code, is_fraud, late) in enumerate(zip(self.txn_ids[lo:hi], self.scen[lo:hi].tolist(),
                                                             fraud.tolist(), self.late[lo:hi].tolist()), lo):
            if sparse and code == 0 and not late:
                continue
            yield i, (f'{{"txn_id":"{tid}","is_fraud":{"true" if is_fraud else "false"},'
                      f'"scenario":"{NAMES[code]}","late":{"true" if late else "false"}}}').encode()


@dataclass
class SimState:
    not_before: np.ndarray                   # per card: no ordinary transaction before (ms)
    prior_count: np.ndarray                  # per card: transactions so far
    compromised_terminals: dict[int, int] = field(default_factory=dict)
    compromised_cards: dict[int, int] = field(default_factory=dict)


class Day:
    """One simulated day's columns while scenarios are applied: the helpers injectors use."""

    def __init__(self, world: World, rng, start_ms: int, state: SimState, card, term, amount, t, channel):
        self.world, self.rng, self.start_ms, self.state = world, rng, start_ms, state
        self.card, self.term, self.amount, self.t = card, term, amount, t
        self.channel = channel
        self.scen = np.zeros(len(card), dtype=np.int8)
        self.used = np.zeros(len(card), dtype=bool)
        self.n_base = len(card)
        self._added: list[tuple[int, int, float, int, int]] = []
        order = np.lexsort((t, card))
        same_next = np.r_[card[order][1:] == card[order][:-1], False]
        self.next_gap = np.full(len(card), np.iinfo(np.int64).max, dtype=np.int64)
        self.next_gap[order[same_next]] = t[order][1:][same_next[:-1]] - t[order][:-1][same_next[:-1]]
        starts = np.r_[True, ~same_next[:-1]] if len(card) else np.zeros(0, dtype=bool)
        gid = np.cumsum(starts) - 1
        self.rank = np.empty(len(card), dtype=np.int64)
        self.rank[order] = np.arange(len(card)) - np.flatnonzero(starts)[gid]

    def anchors(self, channels=None, min_prior: int = 0, min_next_gap_ms: int = 0,
                last_only: bool = False) -> np.ndarray:
        ok = (self.scen == 0) & ~self.used
        if channels is not None:
            ok &= np.isin(self.channel, [CHANNEL_CODE[c] for c in channels])
        if min_prior:
            ok &= self.state.prior_count[self.card] + self.rank >= min_prior
        if last_only:
            ok &= self.next_gap == np.iinfo(np.int64).max
        elif min_next_gap_ms:
            ok &= self.next_gap >= min_next_gap_ms
        return np.flatnonzero(ok)

    def pick(self, eligible: np.ndarray, rate: float) -> np.ndarray:
        """``Binomial(ordinary transactions, rate)`` anchors among ``eligible``, reserved for the caller."""
        k = min(int(self.rng.binomial(self.n_base, min(rate, 1.0))), len(eligible))
        chosen = np.sort(self.rng.choice(eligible, size=k, replace=False)) if k else eligible[:0]
        self.used[chosen] = True
        return chosen

    def add(self, card, term, amount, t, scenario: str) -> None:
        self._added.append((int(card), int(term), float(amount), int(t), CODE[scenario]))

    def hold_card(self, card, until_ms: int) -> None:
        self.state.not_before[card] = max(int(self.state.not_before[card]), until_ms)

    def columns(self):
        if not self._added:
            return self.card, self.term, self.amount, self.t, self.scen
        card, term, amount, t, scen = (np.array(col) for col in zip(*self._added))
        return (np.concatenate([self.card, card]), np.concatenate([self.term, term]),
                np.concatenate([self.amount, amount]), np.concatenate([self.t, t]),
                np.concatenate([self.scen, scen.astype(np.int8)]))


class Simulator:
    def __init__(self, config: SimConfig, world: World | None = None):
        self.config = config
        self.rates = config.resolved_rates()
        self.world = world or build_world(config.profile, config.seed, config.start, config.customers,
                                          config.id_prefix)
        w = self.world
        self.first_card = np.searchsorted(w.card_customer, np.arange(w.n_customers))
        self.cards_of = np.bincount(w.card_customer, minlength=w.n_customers)
        self.start_ms = int(w.start.timestamp() * 1000)
        self.channel_of = np.array([CHANNEL_CODE[c] for c in w.terminal_channel], dtype=np.int8)
        # JSON fragments per card and per terminal, built once: a transaction is then one f-string.
        self._card_json = [f'"card_id":"{card}","customer_id":"{w.customer_ids[cust]}"'
                           for card, cust in zip(w.card_ids, w.card_customer.tolist())]
        self._term_ids_json, self._term_place_json = [], []
        for i, tid in enumerate(w.terminal_ids):
            m = int(w.terminal_merchant[i])
            lat, lon = w.terminal_lat[i], w.terminal_lon[i]
            place = "null" if np.isnan(lat) else repr(float(lat))
            place_lon = "null" if np.isnan(lon) else repr(float(lon))
            self._term_ids_json.append(f'"merchant_id":"{w.merchant_ids[m]}","terminal_id":"{tid}"')
            self._term_place_json.append(f'"channel":"{w.terminal_channel[i]}","mcc":"{w.merchant_mcc[m]}",'
                                         f'"lat":{place},"lon":{place_lon}')
        self.card_keys = [c.encode() for c in w.card_ids]

    # -- the stream ------------------------------------------------------------------------------

    def batches(self) -> Iterator[Batch]:
        """Every transaction in arrival order, one batch per simulated day, forever."""
        w = self.world
        state = SimState(not_before=np.zeros(w.n_cards, dtype=np.int64),
                         prior_count=np.zeros(w.n_cards, dtype=np.int64))
        pending: dict[str, np.ndarray] | None = None
        day = 0
        while True:
            fresh = self._day(day, state)
            merged = fresh if pending is None else {k: np.concatenate([pending[k], fresh[k]]) for k in fresh}
            order = np.argsort(merged["arrival"], kind="stable")
            merged = {k: v[order] for k, v in merged.items()}
            cut = int(np.searchsorted(merged["arrival"], self.start_ms + (day + 1) * DAY_MS))
            pending = {k: v[cut:] for k, v in merged.items()}
            yield Batch(merged["card"][:cut], merged["value"][:cut].tolist(), merged["txn_id"][:cut].tolist(),
                        merged["scen"][:cut], merged["late"][:cut], merged["t"][:cut])
            day += 1

    def take(self, count: int) -> Iterator[Batch]:
        """The first ``count`` transactions of the stream."""
        left = count
        for batch in self.batches():
            if left <= 0:
                return
            if len(batch) > left:
                batch = batch.head(left)
            left -= len(batch)
            yield batch

    # -- one day ---------------------------------------------------------------------------------

    def _day(self, d: int, state: SimState) -> dict[str, np.ndarray]:
        cfg, w = self.config, self.world
        rng = np.random.default_rng([cfg.seed, d, 1])
        start_ms = self.start_ms + d * DAY_MS
        base = self._base_handbook if w.profile == "handbook" else self._base_default
        card, term, amount, t = base(d, rng, start_ms, state)
        day = Day(w, rng, start_ms, state, card, term, amount, t, self.channel_of[term])
        scenarios.label_rules(day, self.rates, state)
        scenarios.inject(day, self.rates, state)
        card, term, amount, t, scen = day.columns()

        order = np.argsort(t, kind="stable")
        card, term, amount, t, scen = card[order], term[order], np.round(amount[order], 2), t[order], scen[order]
        np.maximum.at(state.not_before, card, t + MIN_GAP_S * 1000)
        state.prior_count += np.bincount(card, minlength=w.n_cards)

        prefix = f"{cfg.id_prefix}txn-{cfg.seed}-{d:05d}-"
        txn_ids = [f"{prefix}{i:06d}" for i in range(len(card))]
        times = np.datetime_as_string(t.astype("datetime64[ms]"), unit="ms").tolist()
        cj, tij, tpj, cur = self._card_json, self._term_ids_json, self._term_place_json, cfg.currency
        values = [f'{{"txn_id":"{tid}",{cj[c]},{tij[x]},"amount":{a!r},"currency":"{cur}",'
                  f'"event_time":"{e}Z",{tpj[x]}}}'.encode()
                  for tid, c, x, a, e in zip(txn_ids, card.tolist(), term.tolist(), amount.tolist(), times)]

        arr_rng = np.random.default_rng([cfg.seed, d, 2])  # arrival draws never change the transactions
        arrival = t + arr_rng.integers(0, int(cfg.jitter_s * 1000) + 1, len(t))
        late = arr_rng.random(len(t)) < cfg.late_fraction
        lo, hi = (int(m * 60_000) for m in cfg.late_minutes)
        arrival = arrival + late * arr_rng.integers(lo, hi + 1, len(t))
        return {"arrival": arrival, "t": t, "card": card, "scen": scen, "late": late,
                "value": _objects(values), "txn_id": _objects(txn_ids)}

    def _base_default(self, d: int, rng, start_ms: int, state: SimState):
        w = self.world
        weekday = (w.start.weekday() + d) % 7
        n = rng.poisson(w.txn_per_day * WEEKDAY_FACTOR[weekday])
        cust = np.repeat(np.arange(w.n_customers), n)
        m = len(cust)
        card = self.first_card[cust] + (rng.random(m) * self.cards_of[cust]).astype(np.int64)
        u, r = rng.random(m), rng.random(m)
        n_atm = w.atm_offsets[cust + 1] - w.atm_offsets[cust]
        ecom = u < w.ecom_share[cust]
        atm = ~ecom & (u < w.ecom_share[cust] + w.atm_share[cust]) & (n_atm > 0)
        n_near = w.near_offsets[cust + 1] - w.near_offsets[cust]
        term = w.near_terminals[w.near_offsets[cust] + (r * n_near).astype(np.int64)]
        term[atm] = w.atm_terminals[w.atm_offsets[cust[atm]] + (r[atm] * n_atm[atm]).astype(np.int64)]
        term[ecom] = w.ecom_terminals[(r[ecom] * len(w.ecom_terminals)).astype(np.int64)]
        hour = rng.choice(24, m, p=HOUR_WEIGHTS)
        t = start_ms + hour * HOUR_MS + rng.integers(0, HOUR_MS, m)

        mean = w.mean_amount[cust] * w.terminal_amount_factor[term]
        amount = rng.normal(mean, w.std_amount[cust] * w.terminal_amount_factor[term])
        low = amount < 0.5
        amount[low] = rng.uniform(0.5, 2 * mean[low])
        amount = np.minimum(amount, 3 * w.mean_amount[cust])  # ordinary spending never looks like a spike
        amount[atm] = np.maximum(20, np.round(w.mean_amount[cust[atm]] * rng.uniform(1, 3, int(atm.sum())), -1))
        t = _spread(card, t, state.not_before, MIN_GAP_S * 1000)
        return card, term, np.round(amount, 2), t

    def _base_handbook(self, d: int, rng, start_ms: int, state: SimState):
        """Le Borgne et al.'s ``generate_transactions_table``, vectorised."""
        w = self.world
        n = rng.poisson(w.txn_per_day)
        cust = np.repeat(np.arange(w.n_customers), n)
        secs = rng.normal(86400 / 2, 20000, len(cust)).astype(np.int64)
        n_near = w.near_offsets[cust + 1] - w.near_offsets[cust]
        keep = (secs > 0) & (secs < 86400) & (n_near > 0)
        cust, secs, n_near = cust[keep], secs[keep], n_near[keep]
        m = len(cust)
        amount = rng.normal(w.mean_amount[cust], w.std_amount[cust])
        neg = amount < 0
        amount[neg] = rng.uniform(0, 2 * w.mean_amount[cust[neg]])
        term = w.near_terminals[w.near_offsets[cust] + (rng.random(m) * n_near).astype(np.int64)]
        return cust.copy(), term, np.round(amount, 2), start_ms + secs * 1000


def _spread(card: np.ndarray, t: np.ndarray, not_before: np.ndarray, gap_ms: int) -> np.ndarray:
    """Push each card's times apart so consecutive ones are >= ``gap_ms`` apart and none is before
    the card's ``not_before``: t'_i = gap * rank_i + cummax_within_card(t_i - gap * rank_i)."""
    if len(t) == 0:
        return t
    order = np.lexsort((t, card))
    cs, ts = card[order], t[order].copy()
    starts = np.r_[True, cs[1:] != cs[:-1]]
    gid = np.cumsum(starts) - 1
    rank = np.arange(len(ts)) - np.flatnonzero(starts)[gid]
    ts[starts] = np.maximum(ts[starts], not_before[cs[starts]])
    shifted = pd.Series(ts - gap_ms * rank).groupby(gid).cummax().to_numpy()
    out = np.empty_like(t)
    out[order] = shifted + gap_ms * rank
    return out


def _objects(items: list) -> np.ndarray:
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr
