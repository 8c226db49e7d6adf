"""Reference profiles (customers, cards, merchants) of a simulated world: as a document for files and
into Redis under the keys of ``common.contracts`` for the enrichment services.

Loading is pipelined (no round trip per key) and idempotent: ``HSET`` of the same fields with the
same values leaves Redis unchanged, so loading twice is loading once.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from common.contracts import card_key, customer_key, merchant_key


def _num(x: float, places: int = 5) -> str:
    return "" if math.isnan(x) else f"{round(float(x), places)}"


def customers(world) -> Iterator[tuple[str, dict[str, str]]]:
    for i, cid in enumerate(world.customer_ids):
        yield cid, {"segment": world.segment[i], "home_lat": _num(world.home_lat[i]),
                    "home_lon": _num(world.home_lon[i]), "mean_amount": _num(world.mean_amount[i], 2),
                    "std_amount": _num(world.std_amount[i], 2)}


def cards(world) -> Iterator[tuple[str, dict[str, str]]]:
    for i, cid in enumerate(world.card_ids):
        yield cid, {"customer_id": world.customer_ids[world.card_customer[i]],
                    "issued": world.card_issued[i], "status": "active"}


def merchants(world) -> Iterator[tuple[str, dict[str, str]]]:
    for i, mid in enumerate(world.merchant_ids):
        yield mid, {"name": world.merchant_name[i], "mcc": world.merchant_mcc[i],
                    "category": world.merchant_category[i], "lat": _num(world.merchant_lat[i]),
                    "lon": _num(world.merchant_lon[i])}


def reference_document(sim) -> dict[str, Any]:
    """Everything ``reference.json`` holds: the run's config and every profile."""
    w, cfg = sim.world, sim.config
    return {
        "config": {"seed": cfg.seed, "profile": cfg.profile, "start": w.start.isoformat(),
                   "customers": w.n_customers, "rates": sim.rates, "jitter_s": cfg.jitter_s,
                   "late_fraction": cfg.late_fraction, "late_minutes": list(cfg.late_minutes),
                   "currency": cfg.currency, "id_prefix": cfg.id_prefix},
        "customers": {k: v for k, v in customers(w)},
        "cards": {k: v for k, v in cards(w)},
        "merchants": {k: v for k, v in merchants(w)},
        "terminals": {tid: {"merchant_id": w.merchant_ids[w.terminal_merchant[i]],
                            "channel": w.terminal_channel[i], "lat": _num(w.terminal_lat[i]),
                            "lon": _num(w.terminal_lon[i])}
                      for i, tid in enumerate(w.terminal_ids)},
    }


def load_reference(client, world, chunk: int = 5000) -> dict[str, int]:
    """HSET every profile, ``chunk`` commands per pipeline round trip; returns counts per kind."""
    counts = {}
    for kind, rows, key in (("customers", customers(world), customer_key), ("cards", cards(world), card_key),
                            ("merchants", merchants(world), merchant_key)):
        n = 0
        pipe = client.pipeline(transaction=False)
        for ident, fields in rows:
            pipe.hset(key(ident), mapping=fields)
            n += 1
            if n % chunk == 0:
                pipe.execute()
        pipe.execute()
        counts[kind] = n
    return counts
