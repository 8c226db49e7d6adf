"""Run the job's detectors on simulated transactions before its queries start (a static DataFrame, nothing
written anywhere), so the first live micro-batches do not pay the first runs of the JVM's code, Spark's
generated code and the Python workers (pandas, the model)."""

from __future__ import annotations

import logging
import time
from typing import Sequence

log = logging.getLogger(__name__)

CARDS = 40          # each with an ordinary history, an amount spike, a burst, a double swipe, a journey


def warmup_transactions() -> list[dict]:
    """About 1,200 transactions over 40 cards in which every built-in detector finds its pattern
    (``detectors.samples``), so the warm-up runs the code that finds and reports, not only the code that
    finds nothing."""
    from datetime import timedelta

    from detectors import samples

    txns: list[dict] = []
    for i in range(CARDS):
        card, start = f"warmup-{i:03d}", samples.T0 + timedelta(minutes=7 * i)
        txns += samples.amount_spike(card, start, history=12)
        later = start + timedelta(hours=3)
        txns += samples.card_testing(card, later, count=6)
        txns += samples.double_swipe(card, later + timedelta(minutes=30))
        txns += samples.impossible_travel(card, later + timedelta(hours=1))
    return samples.by_time(txns)


def warm_up(spark, detectors: Sequence, seconds: float) -> int:
    """Run every detector on the same transactions again and again for about ``seconds``; the number of
    rounds. A detector that fails is left out (logged): the warm-up never keeps the job from starting."""
    if seconds <= 0 or not detectors:
        return 0
    from detectors.harness import transactions_frame

    txns = warmup_transactions()
    frame = transactions_frame(spark, txns).cache()
    started = time.monotonic()
    rounds, warming = 0, list(detectors)
    while warming and (rounds == 0 or time.monotonic() - started < seconds):
        for detector in list(warming):
            try:
                detector.run(frame).collect()
            except Exception as error:  # its live query meets it again and sets it apart (the quarantine)
                log.warning("warm-up: %s failed (%s); not warmed", detector.name, str(error).splitlines()[0])
                warming.remove(detector)
        rounds += 1
    frame.unpersist()
    log.info("warmed up: %d round(s) of %d detector(s) on %d transactions in %.1f s", rounds, len(detectors),
             len(txns), time.monotonic() - started)
    return rounds
