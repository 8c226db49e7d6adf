"""The downstream Faust services on the real broker and Redis, each run as its own process exactly as
in production (``python -m sinks.enricher worker`` ...), on topics, consumer groups and Redis keys
private to the test. The dashboard is checked in a real headless Chromium."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest

from common.contracts import card_key, customer_key, merchant_key
from common.kafka_io import json_bytes, json_values, make_producer, read_topic
from common.settings import REPO_ROOT
from common.waiting import wait_until
from tests.builders import at, make_alert

ARTIFACTS = REPO_ROOT / "artifacts"
PARTITIONS = 3


# --- helpers ----------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """One service as a subprocess with its own log file."""

    def __init__(self, name: str, args: list[str], env: dict, log_dir: Path):
        self.name, self.args, self.env, self.log_dir = name, args, env, log_dir
        self.proc: subprocess.Popen | None = None
        self.runs = 0

    def start(self) -> "Service":
        self.runs += 1
        log = open(self.log_dir / f"{self.name}.{self.runs}.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", *self.args], env=self.env, cwd=REPO_ROOT,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def assert_alive(self) -> None:
        if self.proc.poll() is not None:
            logs = sorted(self.log_dir.glob(f"{self.name}.*.log"))[-1].read_text()[-3000:]
            raise AssertionError(f"{self.name} exited with {self.proc.returncode}:\n{logs}")


class Pipeline:
    """Private topics, consumer groups and Redis namespace for the enricher, case manager, dashboard."""

    def __init__(self, stack, tmp: Path, tag: str):
        from common.kafka_admin import TopicSpec, create_topics

        self.tag = f"{tag}{uuid.uuid4().hex[:8]}"
        names = {base: f"test.{base}.{self.tag}" for base in ("alerts", "alerts.enriched", "cases")}
        create_topics(stack, [TopicSpec(n, PARTITIONS) for n in names.values()])
        self.settings = stack.replace(topic_alerts=names["alerts"],
                                      topic_alerts_enriched=names["alerts.enriched"],
                                      topic_cases=names["cases"], partitions_alerts=PARTITIONS)
        self.namespace = f"t-{self.tag}"
        self.dashboard_port = free_port()
        self.env = dict(os.environ, FRAUD_TOPIC_ALERTS=names["alerts"],
                        FRAUD_TOPIC_ALERTS_ENRICHED=names["alerts.enriched"],
                        FRAUD_TOPIC_CASES=names["cases"], FRAUD_PARTITIONS_ALERTS=str(PARTITIONS),
                        FRAUD_ENRICHER_APP_ID=f"test-enricher-{self.tag}",
                        FRAUD_CASES_APP_ID=f"test-cases-{self.tag}",
                        FRAUD_SINKS_NAMESPACE=self.namespace, FRAUD_RUN_DIR=str(tmp / "run"),
                        FRAUD_DASHBOARD_PORT=str(self.dashboard_port), PYTHONUNBUFFERED="1")
        self.tmp = tmp
        self.services: list[Service] = []
        self.producer = make_producer(self.settings)

    def service(self, name: str, *args: str) -> Service:
        service = Service(name, list(args), self.env, self.tmp)
        self.services.append(service)
        return service

    def send_alerts(self, alerts: list[dict]) -> None:
        for alert in alerts:
            self.producer.send(self.settings.topic_alerts, key=alert["card_id"], value=json_bytes(alert))
        self.producer.flush()

    def enriched(self, min_records: int = 0) -> list[dict]:
        return json_values(read_topic(self.settings, self.settings.topic_alerts_enriched,
                                      min_records=min_records))

    def latest_cases(self) -> dict[str, dict]:
        """The cases topic's current view: the highest version of every case_id."""
        latest: dict[str, dict] = {}
        for case in json_values(read_topic(self.settings, self.settings.topic_cases, timeout=120)):
            if case["case_id"] not in latest or case["version"] >= latest[case["case_id"]]["version"]:
                latest[case["case_id"]] = case
        return latest

    def close(self, redis_sync) -> None:
        from common.kafka_admin import delete_topics

        for service in self.services:
            service.stop()
        self.producer.close()
        delete_topics(self.settings, [self.settings.topic_alerts, self.settings.topic_alerts_enriched,
                                      self.settings.topic_cases])
        for key in redis_sync.scan_iter(match=f"*{self.tag}*", count=1000):
            redis_sync.delete(key)


def enriched_by_id(records: list[dict]) -> dict[str, list[dict]]:
    by_id: dict[str, list[dict]] = {}
    for record in records:
        by_id.setdefault(record["alert_id"], []).append(record)
    return by_id


# --- alerts in, enriched alerts and cases out; the dashboard in a browser ---------------------

@pytest.fixture(scope="class")
def pipeline(stack, redis_sync, tmp_path_factory):
    p = Pipeline(stack, tmp_path_factory.mktemp("pipeline"), "p")
    p.service("enricher", "sinks.enricher", "worker", "-l", "info").start()
    p.service("cases", "sinks.cases", "worker", "-l", "info").start()
    p.service("dashboard", "sinks.dashboard").start()
    yield p
    p.close(redis_sync)


class TestPipeline:
    def test_alerts_in_enriched_alerts_and_cases_out(self, pipeline, redis_sync):
        tag, ns = pipeline.tag, pipeline.namespace
        card1, card2 = f"card-{tag}-1", f"card-{tag}-2"
        redis_sync.hset(card_key(card1), mapping={"customer_id": f"cu-{tag}", "issued": "2024-01-01",
                                                  "status": "active"})
        redis_sync.hset(customer_key(f"cu-{tag}"), mapping={"segment": "premium", "home_lat": "52.52",
                                                            "home_lon": "13.405"})
        redis_sync.hset(merchant_key(f"m-{tag}"), mapping={"name": "Corner Bakery", "mcc": "5462",
                                                           "category": "bakery", "lat": "48.8566",
                                                           "lon": "2.3522"})
        # the triggering transaction's context, as every detector writes it (detectors.base.alerts)
        trigger = {"customer_id": f"cu-{tag}", "merchant_id": f"m-{tag}", "terminal_id": f"term-{tag}",
                   "amount": 42.5, "currency": "EUR", "channel": "pos", "lat": 48.8566, "lon": 2.3522}
        swipe = make_alert(card1, [f"{tag}-t1", f"{tag}-t2"], "double_swipe", score=0.7, **trigger,
                           reason="same card, merchant and amount 12.3 s apart")
        velocity = make_alert(card1, [f"{tag}-t1", f"{tag}-t2"], "velocity", score=0.6, event_s=1,
                              merchant_id=f"m-{tag}", reason="2 transactions in 12.3 s")
        unknown = make_alert(card2, [f"{tag}-t9"], "amount_anomaly", score=0.4, event_s=2)
        aborted = make_alert(card1, [f"{tag}-t7"], "geo_travel", score=0.9, event_s=3)

        # an alert in an aborted transaction: a read_committed consumer must never see it
        from kafka import KafkaProducer
        from common.kafka_clients import kafka_python_config
        tx = KafkaProducer(**kafka_python_config(pipeline.settings), transactional_id=f"test-{tag}",
                           enable_idempotence=True, acks="all")
        tx.init_transactions()
        tx.begin_transaction()
        tx.send(pipeline.settings.topic_alerts, key=card1.encode(), value=json_bytes(aborted))
        tx.flush()
        tx.abort_transaction()
        tx.close()
        pipeline.send_alerts([swipe, velocity, unknown])

        def enriched_ids(want):
            ids = set(enriched_by_id(pipeline.enriched()))
            for s in pipeline.services:
                s.assert_alive()
            return ids if want <= ids else None
        wait_until(lambda: enriched_ids({swipe["alert_id"], velocity["alert_id"], unknown["alert_id"]}),
                   180, "the three alerts enriched", interval=0.5)

        # the same alert delivered again, then a marker: the marker's enrichment proves the
        # duplicate was processed (same partition: same card)
        marker = make_alert(card1, [f"{tag}-t3"], "velocity", score=0.5, event_s=30)
        pipeline.send_alerts([swipe, marker])
        wait_until(lambda: enriched_ids({marker["alert_id"]}), 60, "the marker enriched", interval=0.5)

        by_id = enriched_by_id(pipeline.enriched())
        assert {k: len(v) for k, v in by_id.items()} == {
            swipe["alert_id"]: 1, velocity["alert_id"]: 1, unknown["alert_id"]: 1, marker["alert_id"]: 1}
        assert aborted["alert_id"] not in by_id
        e = by_id[swipe["alert_id"]][0]
        assert e["reason"] == swipe["reason"] and e["txn_ids"] == swipe["txn_ids"]
        assert e["profile_missing"] == []
        assert e["enrichment"]["segment"] == "premium"
        assert {name: e[name] for name in trigger} == trigger
        assert e["enrichment"]["merchant_id"] == f"m-{tag}"
        assert e["enrichment"]["merchant_name"] == "Corner Bakery"
        assert e["enrichment"]["merchant_category"] == "bakery"
        assert e["enrichment"]["location_source"] == "terminal"
        assert e["enrichment"]["distance_from_home_km"] == pytest.approx(878, abs=2)
        assert by_id[velocity["alert_id"]][0]["enrichment"]["card_recent_alerts"] == 2
        assert by_id[unknown["alert_id"]][0]["profile_missing"] == ["card", "customer", "merchant"]
        # an alert of an older writer (no trigger context): enriched all the same, its merchant missing
        assert by_id[marker["alert_id"]][0]["profile_missing"] == ["merchant"]
        assert by_id[marker["alert_id"]][0]["enrichment"]["segment"] == "premium"

        def cases_ready():
            latest = pipeline.latest_cases()
            counts = {c["card_id"]: c["alert_count"] for c in latest.values()}
            return latest if counts == {card1: 3, card2: 1} else None
        latest = wait_until(cases_ready, 60, "the cases of both cards", interval=0.5)
        case1 = next(c for c in latest.values() if c["card_id"] == card1)
        assert case1["status"] == "open"
        assert case1["detectors"] == ["double_swipe", "velocity"]
        assert {a["reason"] for a in case1["alerts"]} >= {swipe["reason"], velocity["reason"]}
        assert case1["score"] == pytest.approx(1 - 0.3 * 0.4) and case1["severity"] == "high"
        assert case1["opened_at"] == swipe["detected_at"]
        assert case1["updated_at"] == marker["detected_at"]
        assert sorted(case1["alert_ids"]) == sorted([swipe["alert_id"], velocity["alert_id"],
                                                     marker["alert_id"]])
        # the current cases in Redis, for the dashboard
        stored = json.loads(redis_sync.get(f"{ns}:case:{case1['case_id']}"))
        assert stored["version"] == case1["version"] and stored["alert_count"] == 3
        assert set(redis_sync.zrange(f"{ns}:cases:open", 0, -1)) == set(latest)

    def test_dashboard_in_headless_chromium(self, pipeline, chromium, tmp_path):
        tag = pipeline.tag
        url = f"http://127.0.0.1:{pipeline.dashboard_port}/"
        card = f"card-{tag}-live"
        # written 1.5 s after its event time (make_alert), 0.5 s after its transaction entered Kafka
        pipeline.send_alerts([make_alert(f"card-{tag}-seed", [f"{tag}-s1"], "geo_travel", score=0.95,
                                         event_s=60, reason="2400 km in 40 min: 3600 km/h",
                                         ingested_at=at(61.0))])
        wait_until(lambda: _http_ok(url), 60, "the dashboard answering")
        with Chromium(chromium, tmp_path) as browser:
            browser.navigate(url)
            rows = lambda: browser.evaluate(  # noqa: E731
                "[...document.querySelectorAll('#cases tbody tr')].map(r => r.dataset.cardId)")
            wait_until(lambda: f"card-{tag}-seed" in rows(), 90, "the seed case on the page")
            polls = browser.evaluate("Number(document.getElementById('status').dataset.polls)")
            assert card not in rows()
            # a new alert arrives: the open page shows its case without a reload
            pipeline.send_alerts([make_alert(card, [f"{tag}-l1", f"{tag}-l2"], "double_swipe",
                                             score=0.8, event_s=120, ingested_at=at(121.0),
                                             reason="same card, merchant and amount 4.0 s apart")])
            wait_until(lambda: card in rows(), 90, "the new case appearing on the open page")
            assert browser.evaluate("Number(document.getElementById('status').dataset.polls)") > polls
            text = browser.evaluate("document.body.innerText")
            assert "same card, merchant and amount 4.0 s apart" in text
            assert "double_swipe" in browser.evaluate(
                "document.querySelector('#per-minute tbody').innerText")
            # latency from entering Kafka (the alerts without ingested_at have none), never from event time
            assert browser.evaluate("document.getElementById('kpi-p50').textContent") == "500 ms"
            ARTIFACTS.mkdir(exist_ok=True)
            browser.screenshot(ARTIFACTS / "dashboard.png")
        assert (ARTIFACTS / "dashboard.png").stat().st_size > 10_000


def _http_ok(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url + "api/summary", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


# --- crash test: SIGKILL the enricher and the case manager in the middle of 10,000 alerts --------

# (victim, records in its output topic when it is killed): the enricher twice while it works through
# the alerts, then the case manager twice while it works through the enriched alerts
KILLS = (("enricher", 1500), ("enricher", 5000), ("cases", 4000), ("cases", 8000))


def test_services_killed_mid_stream_lose_nothing_and_duplicate_only_the_batch_in_flight(stack, redis_sync, tmp_path):
    """Every alert enriched and in exactly one case, however often the enricher and the case manager
    die. An enriched alert is duplicated only when the enricher dies between publishing a batch and
    marking it enriched (at-least-once, docs/architecture.md): at most one batch per enricher kill.
    Each card's sixth alert comes two days after its fifth, so half the cases are closed while the
    case manager is being killed (the closing path is crash-tested too)."""
    from sinks import enricher

    p = Pipeline(stack, tmp_path, "r")
    try:
        cards, per_card = 1000, 10
        alerts = [make_alert(f"card-{p.tag}-{c}", [f"{p.tag}-{c}-{i}"],
                             ("double_swipe", "velocity", "geo_travel")[i % 3],
                             event_s=60.0 * i + (2 * 86400 if i >= per_card // 2 else 0),
                             score=0.3 + 0.05 * (i % 3))
                  for i in range(per_card) for c in range(cards)]
        ids = {a["alert_id"] for a in alerts}
        assert len(ids) == 10_000
        output = {"enricher": p.settings.topic_alerts_enriched, "cases": p.settings.topic_cases}
        p.send_alerts(alerts[:6000])
        services = {"enricher": p.service("enricher", "sinks.enricher", "worker", "-l", "info").start(),
                    "cases": p.service("cases", "sinks.cases", "worker", "-l", "info").start()}

        def output_count(victim: str) -> int:
            for service in services.values():
                service.assert_alive()
            return _end_offset_total(p.settings, output[victim])
        killed_at = []
        for kill, (victim, threshold) in enumerate(KILLS):
            killed_at.append((victim, wait_until(
                lambda: output_count(victim) >= threshold and output_count(victim), 240,
                f"{victim} to be past {threshold:,} records", interval=0.05)))
            services[victim].kill()
            if kill == 0:
                p.send_alerts(alerts[6000:])
            services[victim].start()
        print(f"killed at (service, records in its output topic): {killed_at}")
        # every kill in the middle of the work: 10,000 enriched alerts, 11,000 case versions (one per
        # alert and one per closing), duplicates not counted
        assert all(at < {"enricher": 10_000, "cases": 11_000}[victim] for victim, at in killed_at), killed_at

        def all_enriched():
            output_count("enricher")
            seen = set(enriched_by_id(p.enriched()))
            return seen if seen >= ids else None
        wait_until(all_enriched, 300, "all 10,000 alerts enriched after the restarts", interval=1.0)
        by_id = enriched_by_id(p.enriched())
        assert set(by_id) == ids                                    # nothing lost, nothing invented
        duplicated = sum(len(copies) - 1 for copies in by_id.values())
        enricher_kills = sum(victim == "enricher" for victim, _ in KILLS)
        print(f"enriched alerts duplicated by the kills: {duplicated}")
        assert duplicated <= enricher_kills * enricher.BATCH_SIZE, duplicated

        def all_in_cases():
            output_count("cases")
            open_cases = redis_sync.zrange(f"{p.namespace}:cases:open", 0, -1)
            return len(open_cases) == cards and all(
                json.loads(c)["alert_count"] == per_card // 2
                for c in redis_sync.mget([f"{p.namespace}:case:{cid}" for cid in open_cases]))
        wait_until(all_in_cases, 300, "every card's second case open in Redis with its alerts", interval=1.0)
        latest = p.latest_cases()
        in_cases = Counter(a for case in latest.values() for a in case["alert_ids"])
        missing = ids - set(in_cases)
        assert not missing, f"{len(missing)} alerts in no case, e.g. {sorted(missing)[:3]}"
        assert set(in_cases.values()) == {1}                        # each alert in exactly one case
        assert len(latest) == 2 * cards
        assert Counter(c["status"] for c in latest.values()) == {"closed": cards, "open": cards}
    finally:
        p.close(redis_sync)


def _end_offset_total(settings, topic: str) -> int:
    from kafka import TopicPartition
    from common.kafka_io import make_consumer

    consumer = make_consumer(settings, group_id=None, isolation_level="read_uncommitted")
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or []]
        return sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()


# --- a real headless Chromium, driven over the DevTools protocol ------------------------------

@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium (``make test`` installs it as root: ``deploy.browser``), else the test skips."""
    from deploy.browser import CHROMIUM, ensure_chromium
    from tests.dashboard_dom import NO_CHROMIUM

    if not ensure_chromium(say=lambda line: None):
        pytest.skip(NO_CHROMIUM)
    return str(CHROMIUM)


class Chromium:
    """Headless Chromium with a DevTools websocket (aiohttp client), used synchronously."""

    FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-dev-shm-usage", "--window-size=1400,1000", "--remote-debugging-port=0"]

    def __init__(self, binary: str, tmp: Path):
        self.binary, self.profile = binary, tmp / "chromium-profile"
        self.loop = asyncio.new_event_loop()
        self.next_id = 0

    def __enter__(self) -> "Chromium":
        self.proc = subprocess.Popen([self.binary, *self.FLAGS, f"--user-data-dir={self.profile}",
                                      "about:blank"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        active = self.profile / "DevToolsActivePort"
        port = int(wait_until(lambda: active.exists() and active.read_text().split("\n")[0],
                              60, "chromium's DevTools port"))
        self.loop.run_until_complete(self._connect(port))
        return self

    def __exit__(self, *exc) -> None:
        self.loop.run_until_complete(self._close())
        self.loop.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    async def _connect(self, port: int) -> None:
        import aiohttp

        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json(content_type=None)
        page = next(t for t in targets if t["type"] == "page")
        self.ws = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)

    async def _close(self) -> None:
        await self.ws.close()
        await self.session.close()

    async def _call(self, method: str, **params):
        self.next_id += 1
        await self.ws.send_json({"id": self.next_id, "method": method, "params": params})
        while True:
            message = await asyncio.wait_for(self.ws.receive_json(), timeout=30)
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def call(self, method: str, **params):
        return self.loop.run_until_complete(self._call(method, **params))

    def navigate(self, url: str) -> None:
        self.call("Page.enable")
        self.call("Page.navigate", url=url)
        wait_until(lambda: self.evaluate("document.readyState") == "complete", 30, "the page to load")

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> None:
        import base64

        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))
