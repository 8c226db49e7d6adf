"""The case manager SIGKILLed and restarted again and again while alerts arrive: every alert becomes a case.

Each cycle: enriched alerts go in, are turned into cases, the worker is SIGKILLed right after (its
offsets often not yet committed), more alerts arrive while it is down, and it is started again. A
restarted worker recovers its table from the changelog and seeks to the committed offsets; before
``KeepDeliveredFlowControl`` (sinks/faust_support.py) about one restart in 15 lost an alert for good
(dropped from a stream queue at the end of the recovery, its offset committed past). The real broker
and Redis; the worker runs as in production (``python -m sinks.cases worker``). Slow (about 12 s per
cycle, most of it the broker noticing the killed member): ``make test-slow``.
"""

from __future__ import annotations

import json
import os

import pytest

from common.kafka_io import json_bytes, read_topic
from common.waiting import wait_until
from tests.builders import make_alert
from tests.integration.test_faust_services import Pipeline

CYCLES = int(os.environ.get("FRAUD_RESTART_CYCLES", "30"))
ALERTS_PER_STEP = 12            # a few per partition


@pytest.mark.slow
@pytest.mark.timeout(60 + CYCLES * 90)
def test_alerts_that_arrive_while_the_case_manager_is_down_all_become_cases(stack, redis_sync, tmp_path):
    pipeline = Pipeline(stack, tmp_path, "restarts")
    worker = pipeline.service("cases", "sinks.cases", "worker", "-l", "warn").start()
    sent: list[str] = []

    def send(step: str) -> list[str]:
        cards = [f"card-{pipeline.tag}-{step}-{i}" for i in range(ALERTS_PER_STEP)]
        for card in cards:
            alert = make_alert(card, [f"{card}-txn"], "velocity")
            pipeline.producer.send(pipeline.settings.topic_alerts_enriched, key=card.encode(),
                                   value=json_bytes(alert))
        pipeline.producer.flush()
        sent.extend(cards)
        return cards

    def cased() -> set[str]:
        return {json.loads(r.value)["card_id"] for r in read_topic(pipeline.settings, pipeline.settings.topic_cases)}

    def until_cased(cards: list[str], what: str) -> None:
        def done() -> bool:
            worker.assert_alive()
            return set(cards) <= cased()
        wait_until(done, 90, what, interval=0.5)

    try:
        for cycle in range(CYCLES):
            until_cased(send(f"up{cycle}"), f"cycle {cycle}: the alerts sent while the worker runs")
            worker.kill()
            down = send(f"down{cycle}")
            worker.start()
            until_cased(down, f"cycle {cycle}: the alerts sent while the worker was down")
        assert set(sent) <= cased()
    finally:
        pipeline.close(redis_sync)
