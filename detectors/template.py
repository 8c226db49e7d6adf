"""__NAME__: <one line: what pattern this detector finds>.

Copy me: ``make new-detector NAME=my_detector`` (or ``python -m detectors.new_detector my_detector``)
writes this file as ``detectors/my_detector.py`` and a test as ``tests/integration/test_detector_my_detector.py``,
and registers ``my_detector.DETECTOR`` in ``detectors/registry.py``: the shared contract suite
(``tests/integration/test_detector_contract.py``) checks it too. Its input, ``detectors.samples.representative()``,
holds this example's pattern (``samples.cash_out``): add yours there when you change it.
See docs/adding-a-detector.md.

Explain here, for the next analyst: the pattern, the Spark operator you chose and why, and what bounds the
state (every stateful operator must be closed by the watermark: ``detectors.operators.pairs_within``,
``detectors.operators.with_history``, a window aggregation, or a state timeout). Prefer those to Python state:
per-card Python state costs ~0.5-0.85 ms per distinct card per micro-batch and needs a query of its own
(docs/architecture.md, "Spark costs that shaped the design").

This example alerts on a single large amount at a merchant category often used to cash out; it is
stateless, so it needs no state bound at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from detectors.base import Detector, alerts
from detectors.operators import keep


@dataclass(frozen=True)
class Params:
    # One typed field per knob, each with the reason for its default (analysts tune these in backtests),
    # and for a number its range: `python -m detectors params set` refuses anything outside it.
    min_amount: float = field(default=2000.0, metadata={"range": (1.0, 1_000_000.0)})
    """Why this default: <e.g. above the 99.9th percentile of legitimate purchases in this category>."""

    mccs: tuple[str, ...] = ("6051", "4829")
    """Quasi-cash and money transfer: where stolen cards are cashed out."""


def detect(transactions: DataFrame, params: Params) -> DataFrame:
    """Pure PySpark from parsed transactions (already watermarked by the runner) to alerts.

    Never read the wall clock, Kafka, Redis or files; the same code runs on a static DataFrame.
    Filter with ``keep(...)``, not ``.filter(...)``, so every transaction still advances the watermark.
    """
    suspicious = keep(transactions, (F.col("amount") >= F.lit(params.min_amount))
                      & F.col("mcc").isin(*params.mccs))
    return suspicious.select(*alerts(
        DETECTOR,
        card_id=F.col("card_id"),
        txn_ids=F.array(F.col("txn_id")),                 # the evidence transactions, oldest first
        event_time=F.col("event_time"),                   # the triggering (last) transaction's time
        score=F.lit(0.5) + F.lit(0.5) * (F.col("amount") / F.lit(params.min_amount) - 1),   # clipped to 0..1
        reason=F.format_string("%.2f %s at a cash-out merchant category %s",
                               F.col("amount"), F.col("currency"), F.col("mcc")),
        evidence={"amount": F.col("amount")},             # numbers only
        # trigger=...: where the triggering transaction's merchant, terminal, amount... are. Omitted here:
        # each row is the transaction. A pair names its side ("second"); see detectors/base.py alerts().
    ))


DETECTOR = Detector(
    name="__NAME__",
    version="0.1.0",
    description="<one line for `python -m detectors list`>",
    watermark="2 minutes",        # how late a transaction may arrive and still count; bounds the state
    params=Params(),
    detect=detect,
    scenarios=("compromised_card",),     # the simulator's fraud scenarios it is meant to catch (producers/scenarios.py)
)
