"""The whole diamond end to end: producer -> detectors -> exactly-once alerts -> enricher -> cases -> dashboard.

One labelled stream (``targets.TRAFFIC``: 20 s at 1,000 transactions/s with every scenario on) and five
bad records go through the target ``FRAUD_E2E_TARGET`` names (``local`` | ``compose``); each test
checks one aspect of that single run (``conftest.diamond_run``). The same assertions hold on both.
"""

from __future__ import annotations

import base64
from collections import Counter

import pytest

from tests.e2e.stream import newest_open_cases

pytestmark = pytest.mark.timeout(1500)   # the first test also runs the diamond (conftest.diamond_run)

# Recall each detector must reach on its own scenarios, transactions labelled late left out (the
# simulator delivers them minutes behind newer ones and Spark drops those behind the watermark by
# design). Measured here: 1.0 for double_swipe, velocity and impossible_travel, 0.96 for
# amount_anomaly, precision 1.0; the bounds leave room for a miss or two among ~40-85 incidents.
MIN_RECALL = {"double_swipe": 0.9, "velocity": 0.9, "amount_anomaly": 0.85, "impossible_travel": 0.9}
DEFAULT_MIN_RECALL = 0.8           # a detector registered later, until it states its own
MIN_PRECISION = 0.9
MIN_FRAUD_TRANSACTIONS = 10        # per detector, over its scenarios: below this the stream proves nothing
# Detectors whose quality this stream cannot measure, and where it is measured instead. Their queries
# still run here: the drain waits for each, and every other test checks their alerts like the rest.
QUALITY_MEASURED_ELSEWHERE = {
    # Its features need a terminal's and a customer's days of history (up to t-7d); 20 s of traffic is
    # about 2.5 simulated days, and the suite scores with a tiny model trained in seconds.
    "ml_score": "python -m models evaluate (4 test weeks) and tests/integration/test_ml_score.py",
}


def test_every_detector_finds_its_own_scenarios(diamond_run):
    from detectors import registry
    from detectors.backtest import score

    run = diamond_run
    assert run.drain_error is None, run.drain_error
    late = [txn_id for txn_id, label in run.labels.items() if label.get("late")]
    unique = list({a["alert_id"]: a for a in run.alerts}.values())
    report = score(registry.all(), unique, run.labels, recall_excludes=late)
    problems = []
    for detector in registry.all():
        if not detector.scenarios or detector.name in QUALITY_MEASURED_ELSEWHERE:
            continue
        quality = report["detectors"][detector.name]
        frauds = sum(report["fraud_transactions"].get(s, 0) for s in detector.scenarios)
        min_recall = MIN_RECALL.get(detector.name, DEFAULT_MIN_RECALL)
        if frauds < MIN_FRAUD_TRANSACTIONS:
            problems.append(f"{detector.name}: only {frauds} fraud transactions of {detector.scenarios} in the stream")
        elif quality["recall"] < min_recall or (quality["precision"] or 0) < MIN_PRECISION:
            problems.append(f"{detector.name}: recall {quality['recall']} (min {min_recall}), precision "
                            f"{quality['precision']} (min {MIN_PRECISION}), per scenario {quality['per_scenario']}")
    assert not problems, "\n".join(problems)


def test_no_alert_is_written_twice(diamond_run):
    """Read with read_committed: the exactly-once writers' output, as every consumer sees it."""
    counts = Counter(a["alert_id"] for a in diamond_run.alerts)
    assert diamond_run.alerts
    assert [alert_id for alert_id, n in counts.items() if n > 1] == []


def test_every_alert_is_enriched_once_unchanged_and_with_its_profiles(diamond_run):
    """Once: no fault in this run, so the enricher's at-least-once path must not have duplicated any."""
    alerts = {a["alert_id"]: a for a in diamond_run.alerts}
    counts = Counter(e["alert_id"] for e in diamond_run.enriched)
    assert [alert_id for alert_id, n in counts.items() if n > 1] == []
    enriched = {e["alert_id"]: e for e in diamond_run.enriched}
    assert set(enriched) == set(alerts), {"missing": sorted(set(alerts) - set(enriched))[:10],
                                          "unknown": sorted(set(enriched) - set(alerts))[:10]}
    for alert_id, record in enriched.items():
        alert = alerts[alert_id]
        assert {name: record.get(name) for name in alert} == alert
        assert not {"card", "customer"} & set(record["profile_missing"]), record
        assert record["enrichment"]["customer_id"] and record["enriched_at"]


def test_cases_hold_every_alert_once_on_its_own_card(diamond_run):
    alerts = {a["alert_id"]: a for a in diamond_run.alerts}
    placed = Counter(alert_id for case in diamond_run.cases for alert_id in case["alert_ids"])
    assert set(placed) == set(alerts), {"not in a case": sorted(set(alerts) - set(placed))[:10],
                                        "unknown": sorted(set(placed) - set(alerts))[:10]}
    assert [alert_id for alert_id, n in placed.items() if n > 1] == []
    for case in diamond_run.cases:
        mine = [alerts[a] for a in case["alert_ids"]]
        assert {a["card_id"] for a in mine} == {case["card_id"]}, case["case_id"]
        assert case["alert_count"] == len(case["alert_ids"])
        assert set(case["detectors"]) == {a["detector"] for a in mine}, case["case_id"]
    assert any(case["status"] == "open" for case in diamond_run.cases)


def test_each_bad_record_is_dead_lettered_with_its_reason_and_original_bytes(diamond_run):
    run = diamond_run
    by_offset = {(d["source_partition"], d["source_offset"]): d for d in run.dead_letters}
    for sent in run.bad_records:
        letter = by_offset.get((sent.partition, sent.offset))
        assert letter is not None, f"{sent.record.name} is not in {run.settings.topic_dlq}"
        assert letter["reason"].split(":")[0] == sent.reason, (sent.record.name, letter["reason"])
        assert base64.b64decode(letter["value_base64"]) == sent.record.value, sent.record.name
        assert base64.b64decode(letter["key_base64"]) == sent.record.key, sent.record.name
        assert letter["value_size"] == len(sent.record.value) and not letter["value_truncated"]
    # ... and nothing else of this run: every simulated transaction passed validation.
    assert sorted(by_offset) == sorted((s.partition, s.offset) for s in run.bad_records)


def test_the_dashboard_data_endpoint_shows_the_open_cases_and_latest_alerts(diamond_run):
    run = diamond_run
    summary = run.dashboard
    assert summary and "error" not in summary, summary
    newest = {c["case_id"]: c for c in newest_open_cases(run)}
    shown = {row["case_id"]: row for row in summary["cases"] if run.mine(row["card_id"])}
    assert set(shown) == set(newest), {"not shown": sorted(set(newest) - set(shown)),
                                       "not open in the cases topic": sorted(set(shown) - set(newest)),
                                       "open cases (dashboard)": summary["open_cases"]}
    for case_id, row in shown.items():
        case = newest[case_id]
        assert (row["status"], row["card_id"], row["alert_count"], sorted(row["detectors"])) == \
               ("open", case["card_id"], case["alert_count"], sorted(case["detectors"]))
    assert summary["open_cases"] >= sum(1 for c in run.cases if c["status"] == "open")
    latest = [a for a in summary["latest_alerts"] if run.mine(a["card_id"])]
    alert_ids = {a["alert_id"] for a in run.alerts}
    assert latest and {a["alert_id"] for a in latest} <= alert_ids


# Latency from the triggering transaction entering Kafka to the alert being written: seconds on 2 shared
# cores; minutes would mean the dashboard measures something else (e.g. the simulated event time).
MAX_SANE_P99_S = 600


def test_the_dashboard_shows_sane_latency_per_detector_in_a_browser(diamond_run, tmp_path):
    """The run's own ``/api/summary`` (fetched while the diamond ran) rendered by the real page in
    headless Chromium: every detector with alerts shows a p50 and a p99 of seconds, not months."""
    from tests.dashboard_dom import CHROMIUM, NO_CHROMIUM, dump_dom, live_figures, seconds, serve_page

    summary = diamond_run.dashboard
    assert summary and "error" not in summary, summary
    latency = summary["latency"]
    without = {name: f["without"] for name, f in latency["detectors"].items() if f["without"]}
    assert not without, f"alerts without ingested_at (no latency figure), per detector: {without}"
    assert latency["overall"]["count"] > 0 and latency["overall"]["p99_ms"] < MAX_SANE_P99_S * 1000, latency
    if not CHROMIUM.exists():
        pytest.skip(NO_CHROMIUM)
    with serve_page(summary) as url:
        shown = live_figures(dump_dom(url, tmp_path / "chromium"))
    assert shown["status"].startswith("updated"), shown["status"]
    rows = {name: cells for name, cells in shown["detectors"].items() if name in latency["detectors"]}
    assert rows and set(rows) == set(latency["detectors"]), shown["detectors"]
    for name, cells in {"all detectors": {"p50": shown["kpi"]["kpi-p50"], "p99": shown["kpi"]["kpi-p99"]},
                        **rows}.items():
        p50, p99 = seconds(cells["p50"]), seconds(cells["p99"])
        assert p50 is not None and p99 is not None, (name, cells)
        assert 0 <= p50 <= p99 < MAX_SANE_P99_S, (name, cells)


def test_no_card_number_in_any_topic_log_or_written_file(diamond_run):
    """Issue 11: no Luhn-valid 13-19 digit run anywhere the diamond writes (common/pan_scan.py)."""
    run = diamond_run
    s = run.settings
    scanned = run.scanned
    for topic in (s.topic_transactions, s.topic_alerts, s.topic_alerts_enriched, s.topic_cases, s.topic_dlq,
                  s.topic_alert_markers):
        assert scanned["topics"].get(topic), f"{topic} was not scanned (or is empty): {scanned['topics']}"
    assert any(t.startswith(s.cases_app_id) for t in scanned["topics"]), "the case manager's changelog"
    assert scanned["files"] > 0 and scanned["log_files"], scanned
    assert not run.pan_findings, "\n".join(str(f) for f in run.pan_findings[:20])


def test_late_events_dropped_by_each_watermark_are_on_the_dashboard_and_within_the_simulated_late_share(diamond_run):
    """Issue 11: each query's rows dropped by its watermark (``numRowsDroppedByWatermark``) reach the
    dashboard; only events the simulator delivered late can be behind a watermark, so no query drops
    more than that. (The simulated clock runs ~1 hour per wall-clock second, so one micro-batch spans
    minutes of event time and most late events still arrive in time: a small share is expected.)"""
    from demo.drain import writer_ids

    run = diamond_run
    rows = {row["query"]: row for row in run.dashboard.get("queries", [])}
    assert set(writer_ids()) <= set(rows), sorted(rows)
    late = sum(1 for label in run.labels.values() if label.get("late"))
    assert late > 0, "the stream has no late events to check against"
    for name in writer_ids():
        row = rows[name]
        if run.target == "local":
            assert row["input_rows"] >= len(run.labels), row             # every transaction was read
        else:     # the compose run kills the job mid-stream: its totals count since the restart
            assert row["input_rows"] > 0, row
        if run.target == "local":                                        # a compose stack counts earlier runs too
            assert 0 <= row["rows_dropped_by_watermark"] <= late, (name, row, late)
