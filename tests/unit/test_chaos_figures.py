"""The chaos table's figures: the alerts of transactions that entered Kafka after a restart, and the
cases the case manager's table must hold."""

from datetime import datetime, timedelta, timezone

import pytest

from common.contracts import format_event_time
from common.settings import Settings
from tests.e2e.chaos import alerts_after_restart, detector_queries, new_alerts_cells

pytestmark = pytest.mark.unit

RESTART = datetime(2026, 11, 27, 8, 0, 0, tzinfo=timezone.utc)


def alert(ingested_after_s: float, written_after_s: float, detector: str = "double_swipe") -> dict:
    return {"detector": detector, "ingested_at": format_event_time(RESTART + timedelta(seconds=ingested_after_s)),
            "detected_at": format_event_time(RESTART + timedelta(seconds=written_after_s))}


def test_only_transactions_of_the_minute_after_the_restart_count():
    alerts = [alert(-5, 20),      # the backlog: entered before the restart
              alert(2, 25), alert(10, 26), alert(30, 31.5),
              alert(61, 62)]      # after the window
    figures = alerts_after_restart(alerts, RESTART.timestamp())
    assert figures == {"count": 3, "first_s": 25.0, "latency_p50_s": 16.0, "latency_max_s": 23.0}
    assert new_alerts_cells(figures) == ("", "25.0", "16.0 / 23.0 (3 alerts)")


def test_a_stream_that_ended_before_the_restart_says_so():
    figures = alerts_after_restart([alert(-30, 10)], RESTART.timestamp())
    assert figures == {"count": 0}
    assert new_alerts_cells(figures)[1] == "none (the stream had ended)"
    assert new_alerts_cells(None) == ("", "", "")


def test_how_far_behind_the_job_was_at_the_kill_is_the_newest_alert_written_before_it():
    killed = -0.5
    alerts = [alert(-70, -40), alert(-42, -1),      # written before the kill: the newest entered 41.5 s before it
              alert(-30, 20),                       # entered before the kill, written after it: the backlog
              alert(3, 50)]
    figures = alerts_after_restart(alerts, RESTART.timestamp(), stopped_at=RESTART.timestamp() + killed)
    assert figures["behind_s"] == 41.5 and figures["first_s"] == 50.0
    assert new_alerts_cells(figures)[0] == "41.5"
    assert "behind_s" not in alerts_after_restart([alert(3, 50)], RESTART.timestamp(),
                                                  stopped_at=RESTART.timestamp() + killed)
    # the stream had ended: the newest alert says when the traffic stopped, not how far behind the job was
    assert alerts_after_restart(alerts[:2], RESTART.timestamp(), stopped_at=RESTART.timestamp() + killed) == {"count": 0}


def case(case_id: str, status: str, version: int, updated_at: str, reason: str = "") -> dict:
    return {"case_id": case_id, "card_id": "card-1", "status": status, "version": version,
            "updated_at": updated_at, **({"closed_reason": reason} if status == "closed" else {})}


def test_the_table_holds_the_last_case_closed_on_the_topic_not_the_latest_by_the_writers_clock():
    from tests.e2e.chaos import cases_in_table

    # Case A's last alert was written after case B's (the ML query caught up later), but the case
    # manager closed A first: B is the card's previous case in its table.
    gap = "no alert for the card within 24 h"
    a_open, a_closed = case("A", "open", 1, "08:00:09"), case("A", "closed", 2, "08:00:09", gap)
    b_open, b_closed = case("B", "open", 1, "08:00:05"), case("B", "closed", 2, "08:00:05", gap)
    c_open = case("C", "open", 1, "08:00:07")
    published = [a_open, a_closed, b_open, b_closed, c_open]
    assert cases_in_table([a_closed, b_closed, c_open], published) == {"B", "C"}


def test_a_forgotten_card_leaves_nothing_in_the_table_but_a_later_case():
    from tests.e2e.chaos import cases_in_table

    forgotten = case("A", "closed", 2, "08:00:01", "no alert for the card within 7 days of event time")
    again = case("B", "open", 1, "08:00:02")
    assert cases_in_table([forgotten, again], [case("A", "open", 1, "08:00:01"), forgotten, again]) == {"B"}


def test_alerts_flow_again_when_every_query_s_do_and_the_slowest_query_says_how_far_behind():
    query_of = detector_queries(Settings(detector_groups="rules=double_swipe,velocity;ml=ml_score"))
    alerts = [alert(-90, -60, "velocity"), alert(-20, -2, "ml_score"),   # at the kill: rules 89.5 s behind, ml 19.5
              alert(-50, 30, "double_swipe"),                            # the rules query's backlog
              alert(1, 12, "ml_score"), alert(2, 75, "velocity"), alert(3, 80, "double_swipe")]
    figures = alerts_after_restart(alerts, RESTART.timestamp(), stopped_at=RESTART.timestamp() - 0.5,
                                   query_of=query_of)
    assert figures["first_s"] == 75.0 and figures["first_by_query"] == {"ml": 12.0, "rules": 75.0}
    assert figures["behind_s"] == 89.5
    assert new_alerts_cells(figures)[:2] == ("89.5", "75.0 (ml 12.0, rules 75.0)")
    # one query: as before
    assert alerts_after_restart(alerts, RESTART.timestamp(), stopped_at=RESTART.timestamp() - 0.5)["first_s"] == 12.0


def test_a_stream_that_stands_still_for_a_minute_is_stopped():
    """The harness fails within STREAM_STALL_S of the last published record instead of waiting out the
    producer (a producer stuck after a broker restart once held the run for ten minutes)."""
    from tests.e2e.chaos import STREAM_STALL_S, StallWatch

    now = [0.0]
    watch = StallWatch(STREAM_STALL_S, clock=lambda: now[0])
    for second, published in enumerate([0, 250, 500, 500, 750]):
        now[0] = float(second)
        assert not watch.stalled(published)
    now[0] += STREAM_STALL_S                                  # exactly the limit: not yet
    assert not watch.stalled(750)
    now[0] += 0.5
    assert watch.stalled(750)
    assert not watch.stalled(751)                             # one more record: moving again
