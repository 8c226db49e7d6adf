"""The simulated world: customers, their cards, merchants and their terminals.

Built deterministically from a seed. Two profiles:

* ``default``: customers live in the cities of ``geo.CITIES`` and shop at physical terminals within
  ``local_radius_km`` of home (plus e-commerce merchants and ATMs); spending segments set the amount
  distribution and the number of transactions per day.
* ``handbook``: the published parameters of Le Borgne et al.'s simulator (Fraud-Detection Handbook,
  chapter 3): 5,000 customers and 10,000 terminals uniform on a 100 x 100 grid, a customer uses the
  terminals within radius 5, mean amount uniform 5..100 with std = mean / 2, transactions per day
  uniform 0..4. Grid units are km mapped to lat/lon by ``geo.grid_to_latlon``; every terminal is its
  own merchant; every customer has exactly one card; channel is always ``pos``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np

from producers import geo

DEFAULT_START = datetime(2026, 1, 5, tzinfo=timezone.utc)   # a Monday
HANDBOOK_START = datetime(2018, 4, 1, tzinfo=timezone.utc)  # the Handbook's first day

# (category, mcc, weight among physical merchants, amount multiplier)
POS_CATEGORIES = [
    ("grocery", "5411", 30, 1.0), ("restaurant", "5812", 18, 1.0), ("fast_food", "5814", 14, 0.5),
    ("fuel", "5541", 10, 1.2), ("pharmacy", "5912", 8, 0.7), ("clothing", "5651", 8, 1.5),
    ("electronics", "5732", 4, 2.0), ("department_store", "5311", 5, 1.3), ("hotel", "7011", 3, 2.0),
]
ECOM_CATEGORIES = [
    ("digital_goods", "5818", 35, 0.6), ("online_retail", "5999", 40, 1.2),
    ("airline", "4511", 10, 2.0), ("electronics_online", "5732", 15, 2.0),
]
ATM_MCC = "6011"

# (segment, share of customers, mean amount range, transactions per day range, ecom share, atm share)
SEGMENTS = [
    ("young", 0.30, (8.0, 30.0), (2.0, 4.0), 0.35, 0.05),
    ("standard", 0.45, (25.0, 80.0), (1.5, 3.5), 0.25, 0.05),
    ("affluent", 0.20, (80.0, 250.0), (1.0, 3.0), 0.30, 0.03),
    ("business", 0.05, (150.0, 500.0), (2.0, 5.0), 0.20, 0.02),
]


@dataclass
class World:
    profile: str
    start: datetime
    # customers
    customer_ids: list[str]
    segment: list[str]
    home_lat: np.ndarray
    home_lon: np.ndarray
    mean_amount: np.ndarray
    std_amount: np.ndarray
    txn_per_day: np.ndarray
    ecom_share: np.ndarray
    atm_share: np.ndarray
    # cards
    card_ids: list[str]
    card_customer: np.ndarray
    card_issued: list[str]
    customer_cards: list[np.ndarray]      # customer -> its card indices
    # merchants
    merchant_ids: list[str]
    merchant_name: list[str]
    merchant_mcc: list[str]
    merchant_category: list[str]
    merchant_lat: np.ndarray               # NaN for e-commerce
    merchant_lon: np.ndarray
    # terminals
    terminal_ids: list[str]
    terminal_merchant: np.ndarray
    terminal_channel: list[str]            # pos, ecom or atm
    terminal_lat: np.ndarray               # NaN for e-commerce
    terminal_lon: np.ndarray
    terminal_amount_factor: np.ndarray
    # where each customer can shop: CSR lists of terminal indices
    near_offsets: np.ndarray
    near_terminals: np.ndarray
    atm_offsets: np.ndarray
    atm_terminals: np.ndarray
    ecom_terminals: np.ndarray
    far_terminals: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def n_customers(self) -> int:
        return len(self.customer_ids)

    @property
    def n_cards(self) -> int:
        return len(self.card_ids)

    @property
    def n_terminals(self) -> int:
        return len(self.terminal_ids)


def build_world(profile: str = "default", seed: int = 0, start: datetime | None = None,
                customers: int | None = None, id_prefix: str = "") -> World:
    rng = np.random.default_rng([seed, 0x5EED_0001])
    if profile == "default":
        return _default_world(rng, start or DEFAULT_START, customers or 10_000, id_prefix)
    if profile == "handbook":
        return _handbook_world(rng, start or HANDBOOK_START, customers or 5_000, id_prefix)
    raise ValueError(f"unknown profile {profile!r}: default or handbook")


def _ids(prefix: str, kind: str, n: int) -> list[str]:
    return [f"{prefix}{kind}-{i:06d}" for i in range(n)]


def _issued(rng, start: datetime, n: int) -> list[str]:
    days = rng.integers(30, 2000, n)
    return [(start - timedelta(days=int(d))).strftime("%Y-%m-%d") for d in days]


def _csr(lists: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    counts = np.array([len(x) for x in lists], dtype=np.int64)
    offsets = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    flat = np.concatenate(lists).astype(np.int64) if lists else np.zeros(0, dtype=np.int64)
    return offsets, flat


def _default_world(rng, start: datetime, n_customers: int, prefix: str, local_radius_km: float = 10.0) -> World:
    names = [c[0] for c in geo.CITIES]
    city_lat = np.array([c[1] for c in geo.CITIES])
    city_lon = np.array([c[2] for c in geo.CITIES])
    city_w = np.array([c[3] for c in geo.CITIES], dtype=float)
    city_w /= city_w.sum()

    # customers
    seg_idx = rng.choice(len(SEGMENTS), n_customers, p=[s[1] for s in SEGMENTS])
    lo = np.array([SEGMENTS[s][2][0] for s in seg_idx]); hi = np.array([SEGMENTS[s][2][1] for s in seg_idx])
    mean_amount = np.round(rng.uniform(lo, hi), 2)
    std_amount = np.round(mean_amount * rng.uniform(0.3, 0.6, n_customers), 2)
    lo = np.array([SEGMENTS[s][3][0] for s in seg_idx]); hi = np.array([SEGMENTS[s][3][1] for s in seg_idx])
    txn_per_day = rng.uniform(lo, hi)
    ecom_share = np.array([SEGMENTS[s][4] for s in seg_idx]) * rng.uniform(0.5, 1.5, n_customers)
    atm_share = np.array([SEGMENTS[s][5] for s in seg_idx])
    cust_city = rng.choice(len(names), n_customers, p=city_w)
    home_lat, home_lon = geo.offset_km(city_lat[cust_city], city_lon[cust_city],
                                       rng.normal(0, 4, n_customers), rng.normal(0, 4, n_customers))

    # physical merchants: about one per 5 customers, each with 1-3 terminals a few metres apart
    n_pos_merchants = max(len(names) * 10, n_customers // 5)
    pos_w = np.array([c[2] for c in POS_CATEGORIES], dtype=float)
    m_cat = rng.choice(len(POS_CATEGORIES), n_pos_merchants, p=pos_w / pos_w.sum())
    m_city = np.concatenate([np.arange(len(names)),  # every city has merchants
                             rng.choice(len(names), n_pos_merchants - len(names), p=city_w)])
    m_lat, m_lon = geo.offset_km(city_lat[m_city], city_lon[m_city],
                                 rng.normal(0, 5, n_pos_merchants), rng.normal(0, 5, n_pos_merchants))
    n_atms = max(len(names) * 3, n_customers // 30)
    a_city = np.concatenate([np.arange(len(names)),
                             rng.choice(len(names), n_atms - len(names), p=city_w)])
    a_lat, a_lon = geo.offset_km(city_lat[a_city], city_lon[a_city],
                                 rng.normal(0, 5, n_atms), rng.normal(0, 5, n_atms))
    n_ecom = max(20, n_customers // 50)
    ecom_w = np.array([c[2] for c in ECOM_CATEGORIES], dtype=float)
    e_cat = rng.choice(len(ECOM_CATEGORIES), n_ecom, p=ecom_w / ecom_w.sum())

    merchant_name, merchant_mcc, merchant_category = [], [], []
    for i in range(n_pos_merchants):
        cat, mcc = POS_CATEGORIES[m_cat[i]][:2]
        merchant_name.append(f"{cat.replace('_', ' ').title()} {names[m_city[i]]} {i:05d}")
        merchant_mcc.append(mcc); merchant_category.append(cat)
    for i in range(n_atms):
        merchant_name.append(f"ATM {names[a_city[i]]} {i:05d}")
        merchant_mcc.append(ATM_MCC); merchant_category.append("atm")
    for i in range(n_ecom):
        cat, mcc = ECOM_CATEGORIES[e_cat[i]][:2]
        merchant_name.append(f"{cat.replace('_', ' ').title()} Online {i:05d}")
        merchant_mcc.append(mcc); merchant_category.append(cat)
    merchant_lat = np.concatenate([m_lat, a_lat, np.full(n_ecom, np.nan)])
    merchant_lon = np.concatenate([m_lon, a_lon, np.full(n_ecom, np.nan)])
    merchant_factor = np.concatenate([[POS_CATEGORIES[c][3] for c in m_cat], np.ones(n_atms),
                                      [ECOM_CATEGORIES[c][3] for c in e_cat]])

    # terminals: 1-3 per physical merchant, one per ATM and per e-commerce merchant
    per_merchant = rng.integers(1, 4, n_pos_merchants)
    t_merchant = np.concatenate([np.repeat(np.arange(n_pos_merchants), per_merchant),
                                 n_pos_merchants + np.arange(n_atms),
                                 n_pos_merchants + n_atms + np.arange(n_ecom)])
    n_terms = len(t_merchant)
    t_channel = ["pos"] * int(per_merchant.sum()) + ["atm"] * n_atms + ["ecom"] * n_ecom
    jitter = np.where(np.isnan(merchant_lat[t_merchant]), 0.0, 1.0)
    t_lat, t_lon = geo.offset_km(np.nan_to_num(merchant_lat[t_merchant]), np.nan_to_num(merchant_lon[t_merchant]),
                                 rng.normal(0, 0.05, n_terms) * jitter, rng.normal(0, 0.05, n_terms) * jitter)
    t_lat = np.where(np.isnan(merchant_lat[t_merchant]), np.nan, np.round(t_lat, 5))
    t_lon = np.where(np.isnan(merchant_lon[t_merchant]), np.nan, np.round(t_lon, 5))
    t_channel_arr = np.array(t_channel)
    t_city = np.full(n_terms, -1)
    is_pos = t_channel_arr == "pos"; is_atm = t_channel_arr == "atm"
    t_city[is_pos] = m_city[t_merchant[is_pos]]
    t_city[is_atm] = a_city[t_merchant[is_atm] - n_pos_merchants]

    near, atms = [], []
    for c in range(len(names)):
        custs = np.flatnonzero(cust_city == c)
        for kind, out in ((is_pos, near), (is_atm, atms)):
            terms = np.flatnonzero(kind & (t_city == c))
            if len(custs) == 0:
                continue
            dist = geo.haversine_km(home_lat[custs, None], home_lon[custs, None],
                                    t_lat[None, terms], t_lon[None, terms])
            for row, _cust in enumerate(custs):
                within = terms[dist[row] <= local_radius_km]
                if len(within) < 3:  # a customer far out of town still shops at its 3 nearest
                    within = terms[np.argsort(dist[row])[:3]]
                out.append((_cust, np.sort(within)))
    near_lists = [None] * n_customers
    atm_lists = [None] * n_customers
    for cust, terms in near:
        near_lists[cust] = terms
    for cust, terms in atms:
        atm_lists[cust] = terms
    near_offsets, near_flat = _csr(near_lists)
    atm_offsets, atm_flat = _csr(atm_lists)

    # cards: 80 % of customers have one card, 20 % two
    n_cards_per = np.where(rng.random(n_customers) < 0.2, 2, 1)
    card_customer = np.repeat(np.arange(n_customers), n_cards_per)
    bounds = np.concatenate([[0], np.cumsum(n_cards_per)])
    customer_cards = [np.arange(bounds[i], bounds[i + 1]) for i in range(n_customers)]

    return World(
        profile="default", start=start,
        customer_ids=_ids(prefix, "cust", n_customers), segment=[SEGMENTS[s][0] for s in seg_idx],
        home_lat=np.round(home_lat, 5), home_lon=np.round(home_lon, 5),
        mean_amount=mean_amount, std_amount=std_amount, txn_per_day=txn_per_day,
        ecom_share=ecom_share, atm_share=atm_share,
        card_ids=_ids(prefix, "card", len(card_customer)), card_customer=card_customer,
        card_issued=_issued(rng, start, len(card_customer)), customer_cards=customer_cards,
        merchant_ids=_ids(prefix, "merch", len(merchant_name)), merchant_name=merchant_name,
        merchant_mcc=merchant_mcc, merchant_category=merchant_category,
        merchant_lat=np.round(merchant_lat, 5), merchant_lon=np.round(merchant_lon, 5),
        terminal_ids=_ids(prefix, "term", n_terms), terminal_merchant=t_merchant,
        terminal_channel=t_channel, terminal_lat=t_lat, terminal_lon=t_lon,
        terminal_amount_factor=merchant_factor[t_merchant],
        near_offsets=near_offsets, near_terminals=near_flat, atm_offsets=atm_offsets, atm_terminals=atm_flat,
        ecom_terminals=np.flatnonzero(t_channel_arr == "ecom"),
        far_terminals=np.flatnonzero(is_pos),
    )


def _handbook_world(rng, start: datetime, n_customers: int, prefix: str,
                    n_terminals: int = 10_000, radius: float = 5.0) -> World:
    # Customer profiles (Handbook 3.2): location uniform on the grid, mean amount U(5, 100),
    # std = mean / 2, mean transactions per day U(0, 4).
    cx, cy = rng.uniform(0, 100, n_customers), rng.uniform(0, 100, n_customers)
    mean_amount = rng.uniform(5, 100, n_customers)
    std_amount = mean_amount / 2
    txn_per_day = rng.uniform(0, 4, n_customers)
    tx, ty = rng.uniform(0, 100, n_terminals), rng.uniform(0, 100, n_terminals)
    near_lists = []
    for lo in range(0, n_customers, 500):  # chunked: the full matrix would be 50 M distances
        d2 = (cx[lo:lo + 500, None] - tx[None, :]) ** 2 + (cy[lo:lo + 500, None] - ty[None, :]) ** 2
        near_lists.extend(np.flatnonzero(row < radius * radius) for row in d2)
    near_offsets, near_flat = _csr(near_lists)
    home_lat, home_lon = geo.grid_to_latlon(cx, cy)
    t_lat, t_lon = geo.grid_to_latlon(tx, ty)
    pos_w = np.array([c[2] for c in POS_CATEGORIES], dtype=float)
    m_cat = rng.choice(len(POS_CATEGORIES), n_terminals, p=pos_w / pos_w.sum())
    empty = np.zeros(n_customers + 1, dtype=np.int64)
    return World(
        profile="handbook", start=start,
        customer_ids=_ids(prefix, "cust", n_customers), segment=["handbook"] * n_customers,
        home_lat=np.round(home_lat, 5), home_lon=np.round(home_lon, 5),
        mean_amount=mean_amount, std_amount=std_amount, txn_per_day=txn_per_day,
        ecom_share=np.zeros(n_customers), atm_share=np.zeros(n_customers),
        card_ids=_ids(prefix, "card", n_customers), card_customer=np.arange(n_customers),
        card_issued=_issued(rng, start, n_customers),
        customer_cards=[np.array([i]) for i in range(n_customers)],
        merchant_ids=_ids(prefix, "merch", n_terminals),
        merchant_name=[f"Terminal merchant {i:05d}" for i in range(n_terminals)],
        merchant_mcc=[POS_CATEGORIES[c][1] for c in m_cat],
        merchant_category=[POS_CATEGORIES[c][0] for c in m_cat],
        merchant_lat=np.round(t_lat, 5), merchant_lon=np.round(t_lon, 5),
        terminal_ids=_ids(prefix, "term", n_terminals), terminal_merchant=np.arange(n_terminals),
        terminal_channel=["pos"] * n_terminals, terminal_lat=np.round(t_lat, 5), terminal_lon=np.round(t_lon, 5),
        terminal_amount_factor=np.ones(n_terminals),
        near_offsets=near_offsets, near_terminals=near_flat, atm_offsets=empty,
        atm_terminals=np.zeros(0, dtype=np.int64), ecom_terminals=np.zeros(0, dtype=np.int64),
    )
