"""The two targets of the end-to-end suite: where the diamond runs, and how the suite reaches it.

- ``local``: the suite runs the diamond itself on the embedded local stack with ``make demo``'s own
  building blocks (``demo.diamond.LocalDiamond``: run topics, consumer groups, Redis namespace and
  a free dashboard port of its own), writes the demo report, stops every process, then scans the
  run's log and state files. The run's Redis keys, checkpoints and Faust state are removed at the end
  (its logs stay in ``.run/e2e/<run>/logs``).
- ``compose``: the containers of ``deploy/docker-compose.yml`` are already up (``make compose-up``);
  the suite reaches them through the host ports (``make e2e-compose`` sets the ``FRAUD_*`` variables),
  loads the reference profiles, publishes the stream and reads the outputs. Two faults on the way
  (``ComposeFaults``): the detector container is killed (``docker kill``) mid-stream and started again,
  and the broker is restarted (``docker compose restart kafka``, its data on a volume) before the drain.
  It records what the containers ran (``docker inspect``) for the check against the compose file.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import subprocess
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

import pytest

from common.pan_scan import scan_bytes, scan_paths
from common.settings import REPO_ROOT, Settings
from common.waiting import wait_until
from demo.diamond import LocalDiamond, Traffic, dashboard_answers, dashboard_url
from demo.drain import latest_event_time
from deploy import local_stack
from deploy.processes import ProcessGroup
from deploy.topics import project_topics
from tests.e2e.stream import DiamondRun, drive

# 20 s at 1,000/s: ~20,000 transactions of 4,000 customers (about 2.5 simulated days, so cards have the
# history amount_anomaly needs), amount spikes 10x and impossible travel 2x their default rates, so
# every detector's scenario has incidents to find.
TRAFFIC = Traffic(seed=7, duration=20, rate=1000, customers=4000,
                  scenarios=("amount_spike=0.01", "impossible_travel=0.002"))
STREAM_SPAN = timedelta(days=3)          # simulated time TRAFFIC covers, with room to spare

Say = Callable[[str], None]


def new_traffic(start: datetime | None = None) -> Traffic:
    """TRAFFIC with ids of its own (``e2e<8 hex>-``), so runs on one stack never share an id."""
    return dataclasses.replace(TRAFFIC, id_prefix=f"e2e{uuid.uuid4().hex[:8]}-", start=start)


# ---------------------------------------------------------------------------------------------
# local
# ---------------------------------------------------------------------------------------------

def run_local(stack: Settings, out: Path, say: Say) -> DiamondRun:
    from demo.report import write_report
    from demo.monitor import PipelineMonitor

    messages: list[str] = []

    def say_and_keep(message: str) -> None:
        messages.append(message)
        say(message)

    traffic = new_traffic()
    run_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:4]
    dashboard, job_metrics, enricher_metrics, cases_metrics, prometheus_port = service_ports(5)
    base = _with_a_model(stack.replace(dashboard_port=dashboard, detectors_metrics_port=job_metrics,
                                       enricher_metrics_port=enricher_metrics, cases_metrics_port=cases_metrics,
                                       prometheus_port=prometheus_port), out, say)
    diamond = LocalDiamond(base, run_id, traffic, say_and_keep, prefix="e2e")
    started = time.monotonic()
    try:
        with diamond:
            services_up = time.monotonic() - started
            monitor = PipelineMonitor(diamond.settings)
            monitor.start()
            prometheus = _start_prometheus(diamond.settings, say)
            try:
                traffic_started = time.time()
                run = drive("local", diamond.settings, traffic, out, diamond.publish, diamond.check_services, say)
                report = write_report(out, diamond.settings, out / "labels.jsonl", monitor, traffic,
                                      traffic_started, wall_seconds=time.monotonic() - started)
                observed = _observability(diamond.settings, prometheus and prometheus.url)
            finally:
                monitor.stop()
                if prometheus is not None:
                    prometheus.stop()
                    shutil.rmtree(prometheus.settings.run_dir, ignore_errors=True)
        stopping = time.monotonic()
        run.timings = {"services_up": services_up, **run.timings}
        run.local = {"report": report, "out": out, "leftovers": diamond.leftovers, "messages": messages,
                     "log_dir": diamond.log_dir}
        run.metrics = observed
        files = [diamond.settings.run_dir, out]
        run.pan_findings += scan_paths(files)
        run.scanned["files"] = sum(1 for path in files for f in path.rglob("*") if f.is_file())
        run.scanned["log_files"] = sorted(p.name for p in diamond.log_dir.glob("*.log"))
        run.timings["stop_and_scan_files"] = time.monotonic() - stopping
    finally:
        _forget_in_redis(base, diamond.settings.sinks_namespace, traffic.id_prefix)
        for state in ("checkpoints", "faust"):        # the logs stay, for a look after a failure
            shutil.rmtree(diamond.settings.run_dir / state, ignore_errors=True)
    return run


def _with_a_model(settings: Settings, out: Path, say: Say) -> Settings:
    """``settings`` pointing at a registry with a model for ``ml_score``: the registered one if there is
    one, else a tiny model trained here in seconds (a full ``make train`` takes minutes, and the model's
    quality is measured by ``models evaluate``, not by a 20-second stream)."""
    from detectors import registry

    if "ml_score" not in registry.names():
        return settings
    from models.registry import latest_version

    if latest_version(settings.model_registry) is not None:
        return settings
    from tests.models_for_tests import train_tiny_model

    say("no model registered: training a tiny one for this run ...")
    folder = out / "model-registry"
    train_tiny_model(folder)
    return settings.replace(model_registry=folder)


def _start_prometheus(settings: Settings, say: Say):
    """A Prometheus of this run scraping its services (data outside the run's files, which are scanned
    for card numbers), or None without a prometheus binary."""
    import tempfile

    from common.metrics_http import metrics_targets
    from deploy.local_stack import PrometheusServer, ensure_prometheus

    own = settings.replace(run_dir=Path(tempfile.mkdtemp(prefix="e2e-prometheus-")))
    if ensure_prometheus(own) is None:
        return None
    prometheus = PrometheusServer(own, metrics_targets(settings))
    say(prometheus.up())
    return prometheus


def _observability(settings: Settings, prometheus_url: str | None, from_prometheus: bool = False) -> dict:
    """What Prometheus at ``prometheus_url`` says of its targets once they all had time to be scraped (None
    without one), and the metric names: those each service exposes, or (``from_prometheus``) those
    Prometheus has scraped, once they include every name the Grafana dashboard queries."""
    from common.metrics_http import metrics_targets
    from deploy.prometheus_api import metric_names, targets_health
    from tests.metrics_scrape import dashboard_metric_names, exposed_names

    def asked(question):
        try:
            return question(prometheus_url)
        except OSError:                                # not answering (yet)
            return None

    health = None
    if prometheus_url is not None:
        want = {job: "up" for job in metrics_targets(settings)}
        try:
            health = wait_until(lambda: h if (h := asked(targets_health)) == want else None, 60,
                                "Prometheus to find every target up")
        except TimeoutError:
            health = asked(targets_health)
    if not from_prometheus:
        names = {job: exposed_names(target) for job, target in metrics_targets(settings).items()}
    else:
        used = dashboard_metric_names()
        try:                                           # a scrape interval or two after the last fault
            scraped = wait_until(lambda: n if (n := asked(metric_names)) and used <= n else None, 60,
                                 "Prometheus to hold every metric the dashboard queries")
        except TimeoutError:
            scraped = asked(metric_names) or set()
        names = {"prometheus": scraped}
    return {"prometheus_url": prometheus_url, "prometheus_targets": health, "metric_names": names}


# Below the kernel's ephemeral range: a port picked there with bind(0) and bound seconds later can be taken
# meanwhile by one of the many listeners Spark and the services open on ephemeral ports.
SERVICE_PORTS = (29400, 29500)


def service_ports(count: int) -> list[int]:
    """``count`` distinct free ports for the run's HTTP servers (the dashboard, /metrics, Prometheus)."""
    first = local_stack.free_ports(*SERVICE_PORTS, width=count)
    return list(range(first, first + count))


def _forget_in_redis(settings: Settings, namespace: str, id_prefix: str) -> None:
    """The run's profiles and the services' keys (its own namespace)."""
    from common.redis_clients import redis_client

    client = redis_client(settings)
    try:
        for pattern in (f"profile:*:{id_prefix}*", f"{namespace}:*"):
            keys = list(client.scan_iter(match=pattern, count=2000))
            for i in range(0, len(keys), 1000):
                client.delete(*keys[i:i + 1000])
    finally:
        client.close()


# ---------------------------------------------------------------------------------------------
# compose
# ---------------------------------------------------------------------------------------------

def run_compose(settings: Settings, out: Path, say: Say) -> DiamondRun:
    check_compose_reachable(settings)
    traffic = new_traffic(start=_next_start(settings))
    env = settings.to_env()
    faults = ComposeFaults(say)
    with ProcessGroup(out / "logs") as group:
        say("loading reference profiles into the compose stack's Redis ...")
        loader = group.start("load-reference", traffic.reference_args(), env)
        wait_until(lambda: loader.proc.poll() is not None, 600, "load-reference", interval=0.5)
        if loader.proc.returncode != 0:
            raise RuntimeError(f"load-reference failed:\n{loader.tail()}")
        run = drive("compose", settings, traffic, out,
                    lambda labels: faults.watch(group.start("producer", traffic.simulate_args(labels), env)),
                    faults, say)
    run.compose = {"faults": faults.done, **compose_containers()}
    asked = time.monotonic()
    run.metrics = _observability(settings, compose_prometheus_url(settings), from_prometheus=True)
    run.timings["prometheus_checks"] = time.monotonic() - asked
    run.pan_findings += scan_paths([out])
    run.scanned["files"] = sum(1 for f in out.rglob("*") if f.is_file())
    logs, error = compose_logs()
    run.scanned["log_files"] = ["docker compose logs"] if logs else []
    run.scanned["log_error"] = error
    run.pan_findings += scan_bytes(logs or b"", "docker compose logs")
    return run


def compose_prometheus_url(settings: Settings) -> str:
    """The `monitoring` profile's Prometheus through its published port (FRAUD_PROMETHEUS_PORT, which
    ``make e2e-compose`` sets to PROMETHEUS_HOST_PORT)."""
    return f"http://127.0.0.1:{settings.prometheus_port}/"


def check_compose_reachable(settings: Settings) -> None:
    """Fail at once, saying what is missing, when the compose services do not answer."""
    from common.redis_clients import RedisUnreachableError, check_redis
    from demo.diamond import run_topic_names
    from deploy.local_stack import broker_ready

    problems = []
    if not broker_ready(settings):
        problems.append(f"Kafka does not answer on {settings.kafka_bootstrap} (FRAUD_KAFKA_BOOTSTRAP)")
    else:
        missing = {s.name for s in project_topics(settings)} - set(run_topic_names(settings))
        if missing:
            problems.append(f"topics missing on {settings.kafka_bootstrap}: {sorted(missing)} "
                            "(the compose service `topics` creates them)")
    try:
        check_redis(settings, timeout=3)
    except RedisUnreachableError as error:            # also a refused password (RedisAuthError)
        problems.append(str(error))
    if not dashboard_answers(settings):
        problems.append(f"the dashboard does not answer on {dashboard_url(settings)}healthz "
                        "(FRAUD_DASHBOARD_HOST, FRAUD_DASHBOARD_PORT)")
    if problems:
        pytest.fail("FRAUD_E2E_TARGET=compose, but the compose stack is not reachable:\n  - "
                    + "\n  - ".join(problems)
                    + "\nStart it with `make compose-up` (needs a Docker engine), then run `make e2e-compose`;"
                      " or run `make e2e` for the embedded local stack.", pytrace=False)


def _next_start(settings: Settings) -> datetime | None:
    """Where this run's event time starts. A running detector job's watermark only moves forward, so a
    stack that ran before gets a stream after everything in its topic (its last watermark tick)."""
    latest = latest_event_time(settings)
    if latest is None:
        return None                                    # a fresh stack: the simulator's fixed day
    start = latest + timedelta(minutes=15)
    if start + STREAM_SPAN > datetime.now(timezone.utc):
        pytest.fail(f"the compose stack's transactions already reach event time {latest.isoformat()}: a new "
                    "stream after it would run into the future. Start a fresh stack: "
                    "`make compose-down compose-up`.", pytrace=False)
    return start


def compose_logs() -> tuple[bytes | None, str | None]:
    """The containers' logs (``docker compose logs``), or why they could not be read."""
    if shutil.which("docker") is None:
        return None, "the docker CLI is not on PATH"
    result = subprocess.run([str(COMPOSE), "logs", "--no-color"], cwd=REPO_ROOT, capture_output=True, timeout=300)
    if result.returncode != 0:
        return None, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout, None


# The compose command of the make targets: the same file, plugin and image choice (local-images.env).
COMPOSE = REPO_ROOT / "deploy" / "docker" / "compose.sh"
LONG_RUNNING = ("kafka", "redis", "detectors", "enricher", "cases", "dashboard")
KILL_DETECTORS_AFTER_S = 8.0       # into the producer's 20 s: the job is mid-stream
HEALTHY_AGAIN_S = 600.0            # a Spark job restarting in its container on 2 shared cores


def compose(*args: str, timeout: float = 300) -> str:
    """``docker compose -f deploy/docker-compose.yml ARGS`` (deploy/docker/compose.sh); its stdout."""
    result = subprocess.run([str(COMPOSE), *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"docker compose {' '.join(args)} failed: {result.stderr[-1000:]}")
    return result.stdout


def docker(*args: str, timeout: float = 120) -> str:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed: {result.stderr[-1000:]}")
    return result.stdout


@functools.cache
def container_of(service: str) -> str:
    """The id of ``service``'s container (kept across kill, start and restart)."""
    ids = compose("ps", "-a", "-q", service).split()
    if len(ids) != 1:
        raise RuntimeError(f"expected one container of {service}, found {ids}")
    return ids[0]


def container_state(*services: str) -> dict:
    """``State`` of one service's container, or {service: State} of several (one docker inspect)."""
    out = docker("inspect", "--format", "{{json .State}}", *map(container_of, services))
    states = [json.loads(line) for line in out.splitlines() if line.strip()]
    return states[0] if len(services) == 1 else dict(zip(services, states))


def wait_healthy(service: str, timeout: float) -> None:
    wait_until(lambda: (container_state(service).get("Health") or {}).get("Status") == "healthy",
               timeout, f"the {service} container to be healthy again", interval=2)


def compose_containers() -> dict:
    """What really ran: ``docker inspect`` of every container of the project (one-shot ones included),
    the images' own environment, and the variables the compose file was read with."""
    containers = json.loads(docker("inspect", *compose("ps", "-a", "-q").split()))
    images = {c["Config"]["Image"] for c in containers}
    image_env = {tag: image["Config"]["Env"] or [] for image in json.loads(docker("image", "inspect", *images))
                 for tag in image["RepoTags"] or [image["Id"]]}
    # The services of the profiles the stack was started with (make e2e-compose: `monitoring`), as compose
    # itself lists them (compose.sh runs `prometheus` alone where no Grafana image can be had).
    return {"containers": containers, "image_env": image_env,
            "active_services": compose("config", "--services").split(),
            "image_choice": subprocess.run([str(COMPOSE), "which-images"], cwd=REPO_ROOT, capture_output=True,
                                           text=True, timeout=60).stdout.strip()}


class ComposeFaults:
    """``drive``'s check for the compose target: raises when a long-running container has stopped, and
    puts the stack through two faults: ``docker kill`` of the detector container once the producer has
    run ``KILL_DETECTORS_AFTER_S`` (then ``docker compose start``: exactly once across the crash), and,
    once the producer is done and the job healthy again, ``docker compose restart kafka`` (the broker's
    data is on a volume: nothing may be lost)."""

    def __init__(self, say: Say):
        self.say = say
        self.producer = None
        self.producer_started = 0.0
        self.done: list[str] = []

    def watch(self, producer):
        self.producer, self.producer_started = producer, time.monotonic()
        return producer

    def __call__(self) -> None:
        if self.producer is None:
            return
        if not self.done and time.monotonic() - self.producer_started >= KILL_DETECTORS_AFTER_S:
            self.say("docker kill of the detector container mid-stream, then docker compose start ...")
            docker("kill", container_of("detectors"))
            wait_until(lambda: not container_state("detectors")["Running"], 60, "the killed container to stop",
                       interval=0.5)
            compose("start", "detectors")
            self.done.append("kill detectors")
        elif self.done == ["kill detectors"] and self.producer.proc.poll() is not None:
            wait_healthy("detectors", HEALTHY_AGAIN_S)
            self.say("docker compose restart kafka ...")
            compose("restart", "kafka")
            wait_healthy("kafka", 300)
            self.done.append("restart kafka")
        stopped = [name for name, state in container_state(*LONG_RUNNING).items()
                   if state["Status"] in {"exited", "dead"}]
        if stopped:
            raise RuntimeError(f"compose services stopped: {stopped}")
