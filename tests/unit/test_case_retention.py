"""The case manager forgets idle cards: 30 simulated days of alerts, the clock is their event time."""

import asyncio
from datetime import timedelta

from sinks.case_logic import CARD_RETENTION, forget_card, forgotten
from sinks.cases import SWEEP_EVERY, CardSweep, handle_enriched
from tests.builders import BASE_TIME, make_alert

DAY = 86400.0


class FakeStore:
    """The case manager's Redis port in memory: the latest version of every case."""

    def __init__(self):
        self.cases: dict[str, dict] = {}

    async def save(self, alert, cases):
        await self.save_cases(cases)

    async def save_cases(self, cases):
        for case in cases:
            self.cases[case["case_id"]] = case

    def open_cases(self) -> set[str]:
        return {c["case_id"] for c in self.cases.values() if c["status"] == "open"}


class Acked:
    """What Faust's send returns: an awaitable of the broker's ack."""

    def __init__(self, log, what):
        self.log, self.what = log, what

    def __await__(self):
        self.log.append(("acked", self.what))
        return iter(())


def test_forgotten_only_after_the_retention_of_event_time():
    from sinks.case_logic import apply_to_card

    state, _ = apply_to_card(None, make_alert("c1", ["t1"], event_s=0))
    assert not forgotten(state, BASE_TIME + CARD_RETENTION)
    assert forgotten(state, BASE_TIME + CARD_RETENTION + timedelta(seconds=1))
    [closed] = forget_card(state)
    assert (closed["status"], closed["version"], closed["case_id"]) == ("closed", 2, state["case"]["case_id"])
    assert forget_card({"case": None, "previous_case": closed}) == []


def test_thirty_days_of_alerts_keep_the_table_and_the_open_cases_bounded():
    """A new card every 2 hours of event time, each alerted twice: without forgetting, the table holds
    every card ever seen (360) and all their cases stay open; with it, at most the last 7 days' cards
    (+ one sweep period's), and every forgotten card's case is closed in Redis and on the topic."""
    table: dict = {}
    store, sent, acks = FakeStore(), [], []

    async def publish(card_id, case):
        sent.append((card_id, case))
        return Acked(acks, case["case_id"])

    async def scenario():
        sweep = CardSweep()
        sizes = []
        for n in range(360):
            t = n * 2 * 3600.0
            for k, offset in enumerate((0.0, 600.0)):
                alert = make_alert(f"card-{n}", [f"t{n}-{k}"], event_s=t + offset)
                await handle_enriched(alert, table, store, publish, n % 2, sweep)
            sizes.append(len(table))
        return sizes

    sizes = asyncio.run(scenario())
    cards_per_retention = CARD_RETENTION / timedelta(hours=2)
    # + what arrived since each partition's last sweep
    assert max(sizes) <= (CARD_RETENTION + SWEEP_EVERY) / timedelta(hours=2) + 2
    assert min(sizes[len(sizes) // 2:]) >= cards_per_retention - 2  # and the recent cards are kept
    assert "card-0" not in table and "card-359" in table
    assert len(store.open_cases()) == len(table)          # every forgotten card's case is closed in Redis
    latest: dict[str, dict] = {}                          # what a reader of the cases topic keeps
    for _card, case in sorted(sent, key=lambda sent_case: sent_case[1]["version"]):
        latest[case["case_id"]] = case
    assert {c for c, case in latest.items() if case["status"] == "open"} == store.open_cases()
    closed = [case for case in latest.values() if case["status"] == "closed"]
    assert closed and all(case["closed_reason"].startswith("no alert for the card within 7 days") for case in closed)
    assert len(acks) == len(closed)                       # each closing version acknowledged before its tombstone


def test_a_sweep_only_deletes_cards_of_the_partition_in_hand():
    """A Faust table sends a deletion to the changelog partition of the current event."""
    table: dict = {}
    store = FakeStore()

    async def publish(card_id, case):
        return None

    async def scenario():
        sweep = CardSweep()
        await handle_enriched(make_alert("on-0", ["a"], event_s=0), table, store, publish, 0, sweep)
        await handle_enriched(make_alert("on-1", ["b"], event_s=0), table, store, publish, 1, sweep)
        await handle_enriched(make_alert("late-0", ["c"], event_s=30 * DAY), table, store, publish, 0, sweep)

    asyncio.run(scenario())
    assert sorted(table) == ["late-0", "on-1"]
    assert table["on-1"]["partition"] == 1


def test_a_partition_is_swept_once_per_period_of_its_event_time():
    sweep = CardSweep(every=timedelta(hours=1))
    assert sweep.due(0, BASE_TIME)
    assert not sweep.due(0, BASE_TIME + timedelta(minutes=59))
    assert sweep.due(1, BASE_TIME)
    assert sweep.due(0, BASE_TIME + timedelta(hours=1))
