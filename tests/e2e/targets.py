"""The two targets of the end-to-end suite: where the diamond runs, and how the suite reaches it.

- ``local``: the suite runs the diamond itself on the embedded local stack with ``make demo``'s own
  building blocks (``demo.diamond.LocalDiamond``: run topics, consumer groups, Redis namespace and
  a free dashboard port of its own), writes the demo report, stops every process, then scans the
  run's log and state files. The run's Redis keys, checkpoints and Faust state are removed at the end
  (its logs stay in ``.run/e2e/<run>/logs``).
- ``compose``: the containers of ``deploy/docker-compose.yml`` are already up (``make compose-up``);
  the suite reaches them through the host ports (``make e2e-compose`` sets the ``FRAUD_*`` variables),
  loads the reference profiles, publishes the stream and reads the outputs. It starts nothing else.
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
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
    base = _with_a_model(stack.replace(dashboard_port=_free_port()), out, say)
    diamond = LocalDiamond(base, run_id, traffic, say_and_keep, prefix="e2e")
    started = time.monotonic()
    try:
        with diamond:
            services_up = time.monotonic() - started
            monitor = PipelineMonitor(diamond.settings)
            monitor.start()
            try:
                traffic_started = time.time()
                run = drive("local", diamond.settings, traffic, out, diamond.publish, diamond.check_services, say)
                report = write_report(out, diamond.settings, out / "labels.jsonl", monitor, traffic,
                                      traffic_started, wall_seconds=time.monotonic() - started)
            finally:
                monitor.stop()
        stopping = time.monotonic()
        run.timings = {"services_up": services_up, **run.timings}
        run.local = {"report": report, "out": out, "leftovers": diamond.leftovers, "messages": messages}
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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    with ProcessGroup(out / "logs") as group:
        say("loading reference profiles into the compose stack's Redis ...")
        loader = group.start("load-reference", traffic.reference_args(), env)
        wait_until(lambda: loader.proc.poll() is not None, 600, "load-reference", interval=0.5)
        if loader.proc.returncode != 0:
            raise RuntimeError(f"load-reference failed:\n{loader.tail()}")
        run = drive("compose", settings, traffic, out,
                    lambda labels: group.start("producer", traffic.simulate_args(labels), env),
                    lambda: None, say)
    run.pan_findings += scan_paths([out])
    run.scanned["files"] = sum(1 for f in out.rglob("*") if f.is_file())
    logs, error = compose_logs()
    run.scanned["log_files"] = ["docker compose logs"] if logs else []
    run.scanned["log_error"] = error
    run.pan_findings += scan_bytes(logs or b"", "docker compose logs")
    return run


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
    docker = shutil.which("docker")
    if docker is None:
        return None, "the docker CLI is not on PATH"
    result = subprocess.run([docker, "compose", "-f", str(REPO_ROOT / "deploy" / "docker-compose.yml"),
                             "logs", "--no-color"], cwd=REPO_ROOT, capture_output=True, timeout=300)
    if result.returncode != 0:
        return None, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout, None
