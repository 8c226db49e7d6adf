"""The end-to-end suite's stream and what the diamond made of it: the part both targets share.

``drive`` publishes the labelled stream (``python -m producers simulate``, every label to a file) and
a handful of bad records, waits until the pipeline has drained (``demo.drain``: Kafka only), then
reads every output: alerts (``read_committed``), enriched alerts, cases, dead letters, the dashboard's
``/api/summary``, and scans every topic of the deployment for card numbers. Waits poll with deadlines.

Only this run's records are judged: every id of the stream carries the run's ``id_prefix`` and the
dead letters are matched by the offsets of the bad records, so a compose stack that ran before (same
topics, same Redis namespace) does not confuse the checks.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from common.contracts import ContractError, decode_transaction, format_event_time
from common.kafka_io import json_bytes, json_values, make_consumer, make_producer, read_topic
from common.pan_scan import Finding, scan_bytes, scan_records
from common.settings import Settings
from common.waiting import wait_until
from demo.diamond import Traffic, dashboard_url, run_topic_names
from demo.drain import Drain, writer_ids
from deploy.processes import Child

PRODUCER_GRACE_S = 120.0          # beyond the traffic's duration
DRAIN_TIMEOUT_S = 600.0           # the Spark job does 2-5k transactions/s on the 2 shared cores
DOWNSTREAM_TIMEOUT_S = 240.0      # enricher and case manager catching up after the drain
BAD_EVENT_TIME = "2026-01-05T12:00:00.000Z"


@dataclass(frozen=True)
class BadRecord:
    name: str
    key: bytes | None
    value: bytes


@dataclass(frozen=True)
class SentBadRecord:
    record: BadRecord
    partition: int
    offset: int
    reason: str                   # the contract's reason (common.contracts), up to its first colon


@dataclass
class DiamondRun:
    """Everything the tests look at, gathered once per session."""

    target: str
    settings: Settings
    traffic: Traffic
    labels: dict[str, dict]
    alerts: list[dict]            # this run's, as read (read_committed), duplicates included
    enriched: list[dict]
    cases: list[dict]             # the latest version of each of this run's cases
    dead_letters: list[dict]      # dead letters of the offsets this run published to
    bad_records: list[SentBadRecord]
    dashboard: dict
    pan_findings: list[Finding] = field(default_factory=list)
    scanned: dict = field(default_factory=dict)      # what the card-number scan covered
    drain_error: str | None = None
    timings: dict = field(default_factory=dict)      # seconds per phase
    local: dict = field(default_factory=dict)        # local target only: report, leftovers, messages
    compose: dict = field(default_factory=dict)      # compose target only: faults, containers as inspected
    metrics: dict = field(default_factory=dict)      # Prometheus's targets and the metric names seen

    def mine(self, card_id: str) -> bool:
        return card_id.startswith(self.traffic.id_prefix)


def bad_records(prefix: str) -> list[BadRecord]:
    """One record per way a producer gets it wrong; ids carry the run's prefix."""
    def txn(n: int, **changes) -> dict:
        value = {"txn_id": f"{prefix}bad-{n}", "card_id": f"{prefix}card-bad-{n}", "customer_id": f"{prefix}cust-bad",
                 "merchant_id": f"{prefix}merch-bad", "terminal_id": f"{prefix}term-bad", "amount": 12.5,
                 "currency": "EUR", "event_time": BAD_EVENT_TIME, "channel": "pos", "mcc": "5411",
                 "lat": 48.85, "lon": 2.35}
        value.update(changes)
        return {k: v for k, v in value.items() if v is not ...}

    def key(n: int) -> bytes:
        return f"{prefix}card-bad-{n}".encode()

    return [
        BadRecord("malformed JSON", key(1), json_bytes(txn(1))[:-7]),
        BadRecord("missing field", key(2), json_bytes(txn(2, amount=...))),
        BadRecord("negative amount", key(3), json_bytes(txn(3, amount=-12.5))),
        BadRecord("wrong key", f"{prefix}card-other".encode(), json_bytes(txn(4))),
        BadRecord("non-UTF-8", key(5), b'{"txn_id":"' + prefix.encode() + b'bad-5","note":"\xff\xfe"}'),
        # Valid but for a clock an hour fast: accepted, it would move every watermark past the stream.
        BadRecord("event time ahead", key(6), json_bytes(txn(6, event_time=format_event_time(
            datetime.now(timezone.utc) + timedelta(hours=1))))),
    ]


def publish_bad_records(settings: Settings, prefix: str) -> list[SentBadRecord]:
    producer = make_producer(settings)
    sent = []
    try:
        for record in bad_records(prefix):
            meta = producer.send(settings.topic_transactions, key=record.key, value=record.value).get(timeout=30)
            record_time = datetime.fromtimestamp(meta.timestamp / 1000, timezone.utc)
            sent.append(SentBadRecord(record, meta.partition, meta.offset,
                                      contract_reason(record, record_time, settings)))
    finally:
        producer.close()
    return sent


def contract_reason(record: BadRecord, record_time: datetime, settings: Settings) -> str:
    try:
        decode_transaction(record.value, key=record.key, record_time=record_time, check_key=True,
                           max_ahead=settings.event_time_max_ahead)
    except ContractError as error:
        return str(error).split(":")[0]
    raise AssertionError(f"the bad record {record.name!r} passes the contract")


# ---------------------------------------------------------------------------------------------
# Driving the stream through
# ---------------------------------------------------------------------------------------------

def drive(target: str, settings: Settings, traffic: Traffic, out: Path, publish: Callable[[Path], Child],
          check: Callable[[], None], say: Callable[[str], None]) -> DiamondRun:
    """Publish, drain, read back. ``publish(labels_path)`` starts the producer; ``check()`` raises if
    a service of the target died."""
    timings: dict[str, float] = {}
    phase = time.monotonic()
    labels_path = out / "labels.jsonl"
    first_offsets = end_offsets(settings, settings.topic_transactions)
    say(f"publishing {traffic.duration:.0f} s of traffic at {traffic.rate:.0f}/s, then {len(bad_records(''))} bad records ...")
    producer = publish(labels_path)
    wait_until(lambda: check() or producer.proc.poll() is not None, traffic.duration + PRODUCER_GRACE_S,
               "the producer to finish", interval=0.5)
    if producer.proc.returncode != 0:
        raise RuntimeError(f"the producer failed (exit {producer.proc.returncode}):\n{producer.tail()}")
    bad = publish_bad_records(settings, traffic.id_prefix)
    timings["publish"], phase = time.monotonic() - phase, time.monotonic()

    say("draining: waiting until every query has finished the stream ...")
    drain_error = _drain(settings, check)
    timings["drain"], phase = time.monotonic() - phase, time.monotonic()

    from detectors.backtest import load_labels

    run = DiamondRun(target, settings, traffic, load_labels(labels_path), alerts=[], enriched=[], cases=[],
                     dead_letters=[], bad_records=bad, dashboard={}, drain_error=drain_error, timings=timings)
    run.alerts = [a for a in json_values(read_topic(settings, settings.topic_alerts)) if run.mine(a["card_id"])]
    run.dead_letters = [d for d in json_values(read_topic(settings, settings.topic_dlq))
                        if d["source_topic"] == settings.topic_transactions
                        and d["source_offset"] >= first_offsets.get(d["source_partition"], 0)]
    say(f"{len(run.alerts)} alerts; waiting for the enricher, the case manager and the dashboard ...")
    alert_ids = {a["alert_id"] for a in run.alerts}
    run.enriched = _wait_for_records(settings, settings.topic_alerts_enriched, run, alert_ids, _ids_of_enriched)
    run.cases = _latest_versions(_wait_for_records(settings, settings.topic_cases, run, alert_ids, _ids_of_cases))
    run.dashboard = _wait_for_dashboard(settings, run)
    timings["downstream"], phase = time.monotonic() - phase, time.monotonic()
    _keep(out / "outputs", run)

    _scan_topics(run)
    timings["scan_topics"] = time.monotonic() - phase
    return run


def _keep(folder: Path, run: DiamondRun) -> None:
    """What was read, for a look after a failure (and scanned for card numbers with the run's files)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, records in (("alerts", run.alerts), ("enriched", run.enriched), ("cases", run.cases),
                          ("dead_letters", run.dead_letters)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "dashboard.json").write_text(json.dumps(run.dashboard, indent=1))


def end_offsets(settings: Settings, topic: str) -> dict[int, int]:
    """partition -> end offset: where the next record of each partition will go."""
    from kafka import TopicPartition

    consumer = make_consumer(settings, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        return {tp.partition: offset for tp, offset in consumer.end_offsets(tps).items()}
    finally:
        consumer.close()


def _drain(settings: Settings, check: Callable[[], None], writers: list[str] | None = None) -> str | None:
    drain = Drain(settings, writers or writer_ids())
    try:
        wait_until(lambda: check() or drain.done(), DRAIN_TIMEOUT_S, "every query to finish the stream", interval=0.5)
        return None
    except TimeoutError as error:
        return f"{error}: markers since the tick {drain.waiting_for()}"
    finally:
        drain.close()


def _ids_of_enriched(records: list[dict]) -> set[str]:
    return {r["alert_id"] for r in records}


def _ids_of_cases(records: list[dict]) -> set[str]:
    return {a for case in _latest_versions(records) for a in case["alert_ids"]}


def _wait_for_records(settings: Settings, topic: str, run: DiamondRun, alert_ids: set[str],
                      ids_of: Callable[[list[dict]], set[str]]) -> list[dict]:
    """This run's records of ``topic`` once they cover every alert (or what is there at the deadline)."""
    latest: list[dict] = []

    def covered() -> bool:
        nonlocal latest
        latest = [r for r in json_values(read_topic(settings, topic)) if run.mine(r["card_id"])]
        return alert_ids <= ids_of(latest)

    try:
        wait_until(covered, DOWNSTREAM_TIMEOUT_S, f"{topic} to cover every alert", interval=2)
    except TimeoutError:
        pass  # the tests say what is missing
    return latest


def _latest_versions(cases: list[dict]) -> list[dict]:
    latest: dict[str, dict] = {}
    for case in cases:
        if case["case_id"] not in latest or case["version"] > latest[case["case_id"]]["version"]:
            latest[case["case_id"]] = case
    return list(latest.values())


def dashboard_summary(settings: Settings) -> dict:
    with urllib.request.urlopen(dashboard_url(settings) + "api/summary", timeout=10) as response:
        return json.loads(response.read())


def newest_open_cases(run: DiamondRun) -> list[dict]:
    """This run's open cases the dashboard lists: the newest ``MAX_CASES``, in its order (the latest
    update first; its Redis sorted set breaks ties by case id)."""
    from sinks.dashboard.summary import MAX_CASES

    open_cases = [c for c in run.cases if c["status"] == "open"]
    return sorted(open_cases, key=lambda c: (c["updated_at"], c["case_id"]), reverse=True)[:MAX_CASES]


def _wait_for_dashboard(settings: Settings, run: DiamondRun) -> dict:
    summary: dict = {}
    expected = {c["case_id"] for c in newest_open_cases(run)}

    def shows_our_cases() -> bool:
        nonlocal summary
        summary = dashboard_summary(settings)
        return expected <= {c["case_id"] for c in summary.get("cases", [])}

    try:
        wait_until(shows_our_cases, 60, "the dashboard to show this run's cases", interval=1)
    except TimeoutError:
        pass
    return summary


def _scan_topics(run: DiamondRun) -> None:
    """Every record of every topic of the deployment, and the dashboard's JSON, scanned for card numbers."""
    records: Counter[str] = Counter()
    for topic in run_topic_names(run.settings):
        batch = read_topic(run.settings, topic, timeout=120)
        records[topic] = len(batch)
        run.pan_findings += scan_records(batch)
    run.pan_findings += scan_bytes(json.dumps(run.dashboard).encode(), "dashboard /api/summary")
    run.scanned["topics"] = dict(records)
