"""Labelled training data straight from the simulator, in process (no files, no Kafka).

``simulate(profile, seed, days)`` runs ``producers.simulator`` for ``days`` simulated days and returns
one pandas frame: the transaction contract's columns (``event_time`` as naive UTC datetimes, as Spark
hands them to pandas) plus the ground truth ``is_fraud`` and ``scenario`` (never given to a detector).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from producers.scenarios import FRAUD_CODES, NAMES
from producers.simulator import SimConfig, Simulator

COLUMNS = ["txn_id", "card_id", "customer_id", "merchant_id", "terminal_id", "amount", "currency",
           "event_time", "channel", "mcc", "lat", "lon"]


@dataclass(frozen=True)
class DataSpec:
    profile: str = "handbook"        # handbook (Le Borgne et al.'s generator) or default (ours)
    seed: int = 1
    days: int = 72
    customers: int | None = None     # None: the profile's own (handbook 5,000; default 10,000)
    terminals: int | None = None     # handbook profile only; None: the Handbook's 10,000 (small worlds
                                     # for tests keep the terminals per customer realistic)

    def describe(self) -> dict:
        return {"source": "producers.simulator (in process)", "profile": self.profile, "seed": self.seed,
                "days": self.days, "customers": self.customers, "terminals": self.terminals}

    def simulator(self) -> Simulator:
        config = SimConfig(seed=self.seed, profile=self.profile, customers=self.customers)
        if self.terminals is None:
            return Simulator(config)
        if self.profile != "handbook":
            raise ValueError("terminals can only be set for the handbook profile")
        from producers.world import HANDBOOK_START, _handbook_world
        world = _handbook_world(np.random.default_rng([self.seed, 0x5EED_0001]), HANDBOOK_START,
                                self.customers or 5_000, "", n_terminals=self.terminals)
        return Simulator(config, world=world)


def frame_from_batches(batches) -> pd.DataFrame:
    """Transactions + ground truth of simulator ``Batch``es as one frame, in event-time order."""
    records, scen = [], []
    for batch in batches:
        records.extend(json.loads(v) for v in batch.values)
        scen.append(np.asarray(batch.scen))
    frame = pd.DataFrame.from_records(records, columns=COLUMNS)
    codes = np.concatenate(scen) if scen else np.zeros(0, dtype=np.int8)
    frame["event_time"] = pd.to_datetime(frame["event_time"], format="%Y-%m-%dT%H:%M:%S.%fZ")
    frame["is_fraud"] = FRAUD_CODES[codes].astype(np.int8)
    frame["scenario"] = np.asarray(NAMES, dtype=object)[codes]
    return frame.sort_values(["event_time", "txn_id"], kind="mergesort").reset_index(drop=True)


def simulate(spec: DataSpec, simulator: Simulator | None = None) -> pd.DataFrame:
    sim = simulator or spec.simulator()
    batches = []
    for day, batch in enumerate(sim.batches()):
        if day >= spec.days:
            break
        batches.append(batch)
    return frame_from_batches(batches)


def to_contract(frame: pd.DataFrame) -> list[dict]:
    """Rows as transaction dicts in the contract (``event_time`` an ISO string), e.g. for the harness."""
    out = frame[COLUMNS].copy()
    out["event_time"] = out["event_time"].dt.strftime("%Y-%m-%dT%H:%M:%S.%f").str[:-3] + "Z"
    records = out.to_dict("records")
    for r in records:
        for name in ("lat", "lon"):
            if r[name] is not None and not np.isfinite(r[name]):
                r[name] = None
    return records
