"""``make demo``: the whole diamond on the embedded local stack, with a live view and a final report.

Steps: start Kafka and Redis; give this run its own topics, consumer groups and Redis namespace
(so runs never mix); load the reference profiles; train a model if none is registered; start the
detector job, the enricher, the case manager and the dashboard; publish simulated transactions with
every fraud scenario on for ``--duration`` seconds; wait until the pipeline has drained; write the
report; stop everything it started (also on Ctrl-C).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from common.settings import REPO_ROOT, Settings, get_settings
from common.waiting import wait_until
from deploy import local_stack
from deploy.monitor import PipelineMonitor
from deploy.processes import ProcessGroup
from deploy.topics import create_project_topics, delete_topics, project_topics


def run_settings(base: Settings, run_id: str) -> Settings:
    """This run's own topics, consumer groups, Redis namespace, checkpoints and run folder."""
    prefix = f"demo-{run_id}"
    return base.replace(
        topic_transactions=f"{prefix}.transactions", topic_labels=f"{prefix}.transactions.labels",
        topic_dlq=f"{prefix}.transactions.dlq", topic_alerts=f"{prefix}.alerts",
        topic_alert_markers=f"{prefix}.alerts.markers", topic_alerts_enriched=f"{prefix}.alerts.enriched",
        topic_cases=f"{prefix}.cases", sinks_namespace=prefix,
        enricher_app_id=f"{prefix}-enricher", cases_app_id=f"{prefix}-cases",
        run_dir=base.run_dir / "demo" / run_id, checkpoint_root=base.run_dir / "demo" / run_id / "checkpoints")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m deploy.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60, help="seconds of simulated traffic (default 60)")
    parser.add_argument("--rate", type=float, default=1000, help="transactions per second (default 1000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep-running", action="store_true",
                        help="after the report, keep the services and the dashboard up until Ctrl-C")
    parser.add_argument("--out", type=Path, default=None, help="report folder (default artifacts/demo/<run>)")
    parser.add_argument("--drain-timeout", type=float, default=600, help="seconds to wait for the pipeline to drain")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete this run's topics at the end")
    parser.add_argument("--no-live", action="store_true", help="plain log lines instead of the live view")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base = get_settings()
    run_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    settings = run_settings(base, run_id)
    out = args.out or REPO_ROOT / "artifacts" / "demo" / run_id
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    say = _printer()

    say("starting the local stack (Kafka, Redis) ...")
    local_stack.up(base, log=lambda msg: say(f"  {msg}"))
    create_project_topics(settings)
    env = settings.to_env()
    labels_path = out / "labels.jsonl"
    monitor = PipelineMonitor(settings)
    exit_code = 0
    with ProcessGroup(settings.run_dir / "logs", base_env=None) as group:
        try:
            say("loading reference profiles into Redis ...")
            _run_to_end(group, "load-reference", ["-m", "producers", "load-reference", "--seed", str(args.seed)], env)
            _train_model_if_missing(group, env, say)
            say("starting the detector job, the enricher, the case manager and the dashboard ...")
            group.start("detectors", ["-m", "detectors", "run"], env)
            group.start("enricher", ["-m", "sinks.enricher", "worker", "--without-web", "-l", "warn"], env)
            group.start("cases", ["-m", "sinks.cases", "worker", "--without-web", "-l", "warn"], env)
            group.start("dashboard", ["-m", "sinks.dashboard"], env)
            dashboard = f"http://{settings.dashboard_host}:{settings.dashboard_port}/"
            _wait_for_services(group, settings, say)
            monitor.start()
            say(f"dashboard: {dashboard}")
            say(f"publishing simulated transactions for {args.duration:.0f} s at {args.rate:.0f}/s ...")
            traffic_started = time.time()
            group.start("producer", ["-m", "producers", "simulate", "--seed", str(args.seed), "--duration",
                                     str(args.duration), "--rate", str(args.rate), "--labels-out", str(labels_path),
                                     "--no-labels-topic", "--no-progress"], env)
            _live_view(group, monitor, dashboard, args, say)
            figures = monitor.snapshot()
            from deploy.demo_report import write_report
            report = write_report(out, settings, labels_path, monitor, args, traffic_started,
                                  wall_seconds=time.monotonic() - started)
            say(report["summary_text"])
            say(f"report: {out / 'report.md'}")
            if figures["duplicate_alert_ids"]:
                exit_code = 1
            if args.keep_running:
                say(f"still running: dashboard {dashboard}  (Ctrl-C to stop everything)")
                services = [group.children[n] for n in ("detectors", "enricher", "cases", "dashboard")]
                wait_until(lambda: any(c.proc.poll() is not None for c in services), 10 ** 9,
                           "Ctrl-C (or a service to stop)", interval=1)
        except KeyboardInterrupt:
            say("interrupted: stopping everything ...")
            exit_code = 130
        finally:
            monitor.stop()
            group.stop_all()
            left = group.leftovers()
            say("all processes stopped" if not left else f"processes left behind: {left}")
            if left:
                exit_code = exit_code or 1
    if not args.keep_topics:
        delete_topics(base, [spec.name for spec in project_topics(settings)])
    return exit_code


def _printer():
    def say(message: str) -> None:
        print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)
    return say


def _run_to_end(group: ProcessGroup, name: str, args: list[str], env: dict[str, str], timeout: float = 900) -> None:
    child = group.start(name, args, env)
    wait_until(lambda: child.proc.poll() is not None, timeout, name, interval=0.2)
    if child.proc.returncode != 0:
        raise RuntimeError(f"{name} failed (exit {child.proc.returncode}):\n{child.tail()}")


def _train_model_if_missing(group: ProcessGroup, env: dict[str, str], say) -> None:
    try:
        from detectors import registry
    except ImportError:
        return
    if "ml_score" not in registry.names():
        return
    from models.registry import latest_version  # noqa: WPS433 - only when the ML detector is registered
    if latest_version(get_settings().model_registry) is None:
        say("no model registered: training one (make train) ...")
        _run_to_end(group, "train", ["-m", "models", "train"], env)


def _wait_for_services(group: ProcessGroup, settings: Settings, say, timeout: float = 420) -> None:
    """Every detector query has reported progress and the dashboard answers."""
    import urllib.request

    from detectors import registry

    expected = {f"detector-{d.name}" for d in registry.all()} | {"dlq"}
    progress_dir = settings.run_dir / "progress"

    def ready() -> bool:
        for child in group.children.values():
            if child.proc.poll() is not None and child.name not in {"load-reference", "train"}:
                raise RuntimeError(f"{child.name} exited at start:\n{child.tail()}")
        started = {p.stem for p in progress_dir.glob("*.json")} if progress_dir.exists() else set()
        if not expected <= started:
            return False
        try:
            with urllib.request.urlopen(f"http://{settings.dashboard_host}:{settings.dashboard_port}/healthz",
                                        timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    wait_until(ready, timeout, "the detector queries and the dashboard", interval=0.5)


def _live_view(group: ProcessGroup, monitor: PipelineMonitor, dashboard: str, args, say) -> None:
    """Refresh the figures until the producer is done and the pipeline has drained."""
    from rich.live import Live
    from rich.table import Table

    def table() -> Table:
        f = monitor.snapshot()
        t = Table(title=f"fraud-detection demo — dashboard {dashboard}", show_header=False)
        t.add_row("transactions", f"{f['transactions']:,}  ({f['transactions_per_second']:,}/s)")
        for name, count in sorted(f["alerts_by_detector"].items()):
            t.add_row(f"alerts · {name}", f"{count:,}")
        t.add_row("open cases", str(_open_cases(monitor.settings)))
        t.add_row("latency p50 / p99", f"{_seconds(f['latency_p50_s'])} / {_seconds(f['latency_p99_s'])}")
        t.add_row("dead letters", f"{f['dead_letters']:,}")
        return t

    producer = group.children["producer"]
    drain = Drain(monitor.settings)
    deadline = time.monotonic() + args.duration + args.drain_timeout
    live = None if args.no_live or not sys.stdout.isatty() else Live(table(), refresh_per_second=2)
    if live:
        live.start()
    try:
        while time.monotonic() < deadline:
            monitor.stopped.wait(timeout=1.0)  # the refresh interval of the live view
            for child in group.children.values():
                if child.name in {"detectors", "enricher", "cases", "dashboard"} and child.proc.poll() is not None:
                    raise RuntimeError(f"{child.name} died:\n{child.tail()}")
            f = monitor.snapshot()
            if live:
                live.update(table())
            else:
                say(f"{f['transactions']:,} transactions ({f['transactions_per_second']}/s), "
                    f"alerts {f['alerts_by_detector']}, latency p50 {_seconds(f['latency_p50_s'])}")
            if producer.proc.poll() is not None and drain.done(f["alerts"]):
                return
        say("the pipeline did not drain before the deadline: reporting what arrived")
    finally:
        if live:
            live.stop()


class Drain:
    """When has the pipeline finished with the traffic?

    Once the producer is done, one "watermark tick" (a transaction on a dedicated card, with the
    wall clock as event time) is published: it moves every query's watermark past the simulated
    day, so event-time windows still open (a card-testing burst at the very end) close and report,
    as they would under continuing traffic. Drained = every query has read to the end of the topic,
    and no new alert has arrived for a few seconds since.
    """

    QUIET_SECONDS = 8

    def __init__(self, settings: Settings):
        self.settings = settings
        self.ticked = False
        self.last_alerts, self.quiet_since = -1, time.monotonic()

    def done(self, alerts: int) -> bool:
        if not self.ticked:
            self._publish_tick()
            self.ticked = True
        if alerts != self.last_alerts:
            self.last_alerts, self.quiet_since = alerts, time.monotonic()
        return self._caught_up() and time.monotonic() - self.quiet_since > self.QUIET_SECONDS

    def _publish_tick(self) -> None:
        from common.kafka_io import json_bytes, make_producer
        from detectors.harness import watermark_tick

        tick = watermark_tick(datetime.now(timezone.utc))
        producer = make_producer(self.settings)
        producer.send(self.settings.topic_transactions, key=tick["card_id"], value=json_bytes(tick)).get(timeout=30)
        producer.close()

    def _caught_up(self) -> bool:
        from kafka import TopicPartition

        from common.kafka_io import make_consumer

        consumer = make_consumer(self.settings, group_id=None)
        try:
            topic = self.settings.topic_transactions
            tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
            end = sum(consumer.end_offsets(tps).values())
        finally:
            consumer.close()
        reached = [json.loads(p.read_text()).get("end_offset_total", 0)
                   for p in (self.settings.run_dir / "progress").glob("*.json")]
        return bool(reached) and min(reached) >= end


def _open_cases(settings: Settings) -> int:
    import redis

    from sinks.redis_keys import RedisKeys
    try:
        return redis.Redis.from_url(settings.redis_url).zcard(RedisKeys(settings.sinks_namespace).open_cases)
    except redis.RedisError:
        return -1


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


if __name__ == "__main__":
    sys.exit(main())
