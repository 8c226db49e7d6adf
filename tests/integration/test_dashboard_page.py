"""The dashboard's page in a real headless Chromium, on a summary built here: the live figures come
first and show latency per detector from entering Kafka, the open cases come a page at a time."""

from __future__ import annotations

import pytest

from sinks.case_logic import apply_alert
from sinks.dashboard.summary import CASES_PER_PAGE, case_page, summarize
from tests.builders import at, make_alert
from tests.dashboard_dom import CHROMIUM, NO_CHROMIUM, dump_dom, live_figures, seconds, serve_page

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=NO_CHROMIUM)


def stored_alert(i: int, detector: str, latency_s: float | None) -> dict:
    detected = 1000 + i
    return {"alert_id": f"{detector}-{i}", "detector": detector, "card_id": f"card-{i}", "score": 0.9,
            "reason": "r", "event_time": at(-86_400 * 200), "detected_at": at(detected),
            "ingested_at": None if latency_s is None else at(detected - latency_s)}


def test_live_figures_first_latency_per_detector_and_one_page_of_cases(tmp_path):
    cases = [apply_alert(None, make_alert(f"card-{i:03d}", [f"t{i}"], event_s=i)) for i in range(134)]
    alerts = ([stored_alert(i, "velocity", 0.85) for i in range(50)]
              + [stored_alert(i, "double_swipe", 2.4) for i in range(10)]
              + [stored_alert(i, "amount_anomaly", None) for i in range(5)])     # an older writer: no figure
    counts = {("202611221000", "velocity"): 50, ("202611221000", "double_swipe"): 10,
              ("202611221000", "amount_anomaly"): 5}
    queries = {"detector-velocity": {"input_rows": 120_000}, "dlq": {"input_rows": 120_000}}
    page = case_page(134, 1, CASES_PER_PAGE)
    summary = summarize(cases[-20:], 134, alerts, counts, queries, page)
    requests: list[dict] = []
    with serve_page(summary, requests) as url:
        dom = dump_dom(url, tmp_path / "chromium")
    shown = live_figures(dom)
    assert shown["status"].startswith("updated"), shown["status"]
    assert shown["kpi"]["kpi-p50"] == "850 ms" and shown["kpi"]["kpi-p99"] == "2.40 s"
    assert shown["kpi"]["kpi-read"] == "120,000" and shown["kpi"]["kpi-open"] == "134"
    assert shown["kpi"]["kpi-alerts"] == "65" and shown["kpi"]["kpi-lag"] == "\u2014"   # not published
    assert shown["detectors"] == {
        "amount_anomaly": {"alerts": "5", "p50": "\u2014", "p99": "\u2014", "samples": "0 of 5", "precision": "\u2014"},
        "double_swipe": {"alerts": "10", "p50": "2.40 s", "p99": "2.40 s", "samples": "10 of 10", "precision": "\u2014"},
        "velocity": {"alerts": "50", "p50": "850 ms", "p99": "850 ms", "samples": "50 of 50", "precision": "\u2014"},
    }
    assert seconds(shown["detectors"]["velocity"]["p99"]) == pytest.approx(0.85)
    assert shown["case_rows"] == CASES_PER_PAGE
    assert shown["cases_range"] == "1\u201320 of 134 (page 1 of 7)"
    assert requests and requests[0] == {"page": "1", "per_page": str(CASES_PER_PAGE)}
    # the live figures come before the table of cases
    assert dom.index('id="kpi-p99"') < dom.index('id="detectors"') < dom.index('id="cases"')
