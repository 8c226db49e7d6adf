"""``make demo``: the whole diamond on the embedded local stack, with a live view and a final report.

Steps: start Kafka and Redis; give this run its own topics, consumer groups and Redis namespace
(so runs never mix); load the reference profiles; train a model if none is registered; start the
detector job, the enricher, the case manager and the dashboard; publish simulated transactions with
every fraud scenario on for ``--duration`` seconds; wait until the pipeline has drained; write the
report; stop everything it started (also on Ctrl-C). The building blocks (``demo.diamond``,
``demo.drain``) are shared with the end-to-end suite.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from common.cli_errors import ArgumentParser, positive_float, positive_int, run_command
from common.metrics_http import metrics_urls
from common.settings import REPO_ROOT, Settings, get_settings
from common.waiting import wait_until
from demo.diamond import LocalDiamond, Traffic, dashboard_url
from demo.drain import Drain
from demo.monitor import PipelineMonitor

# Every fraud scenario on. Our default simulator profile leaves one of the Handbook's scenarios off
# (every amount above 220.00 is fraud); the ML model is trained on Handbook-compatible data where it
# is on, and without it the model's alerts on large amounts would all be false positives.
DEMO_SCENARIOS = ("amount_over_220=1",)
# The rate of the measured curve at which the five detectors come nearest their latency targets on two
# cores, and two minutes because the Spark JVM's first minute is spent compiling (docs/performance.md,
# "Real time in make demo"; the report gives the traffic's second half apart). `--rate 1000` shows throughput.
DEFAULT_RATE = 50
DEFAULT_DURATION_S = 120
# The simulated world grows with the rate (customers per transaction per second), so a simulated day
# passes as fast at any rate and cards build the history amount_anomaly and ml_score score against in
# the same wall time; a fixed world at a low rate left them none.
CUSTOMERS_PER_RATE = 10
MIN_CUSTOMERS = 200
# The detector job rehearses its queries on throw-away topics with sample transactions for this long
# before the traffic (spark_job/tuning/rehearsal.py), long enough for the JIT to have compiled the batches' code
# when the first live batches run (docs/performance.md, "A warm job").
# Not the job's own default: a restart should not wait.
DEFAULT_WARMUP_S = 60.0
REFRESH_S = 1.0           # how often the live view (a terminal) is redrawn and the drain checked
PLAIN_LINE_EVERY_S = 10.0  # without a terminal (or with --no-live): one line of figures this often


class Every:
    """True at the first call, then once ``seconds`` have passed since the last true."""

    def __init__(self, seconds: float, clock=time.monotonic):
        self.seconds, self.clock, self.last = seconds, clock, None

    def due(self) -> bool:
        now = self.clock()
        if self.last is not None and now - self.last < self.seconds:
            return False
        self.last = now
        return True


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = ArgumentParser(prog="python -m demo", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=positive_float, default=DEFAULT_DURATION_S,
                        help=f"seconds of simulated traffic (default {DEFAULT_DURATION_S})")
    parser.add_argument("--rate", type=positive_float, default=DEFAULT_RATE,
                        help=f"transactions per second (default {DEFAULT_RATE}; see docs/performance.md for the "
                             "latency at other rates)")
    parser.add_argument("--customers", type=positive_int, default=None,
                        help=f"customers in the simulated world (default {CUSTOMERS_PER_RATE} per transaction per "
                             "second, so a simulated day takes about 26 s at any rate)")
    parser.add_argument("--warmup", type=float, default=DEFAULT_WARMUP_S, metavar="SECONDS",
                        help=f"seconds the detector job rehearses its queries on throw-away topics before the "
                             f"traffic (default {DEFAULT_WARMUP_S:.0f}, about twice that in all; 0: none)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--detectors", nargs="+", metavar="NAME", default=None,
                        help="run only these detectors (default: every registered one); e.g. to see what one "
                             "detector costs the others in latency")
    parser.add_argument("--keep-running", action="store_true",
                        help="after the report, keep the services and the dashboard up until Ctrl-C")
    parser.add_argument("--out", type=Path, default=None, help="report folder (default artifacts/demo/<run>)")
    parser.add_argument("--drain-timeout", type=positive_float, default=600,
                        help="seconds to wait for the pipeline to drain")
    parser.add_argument("--keep-topics", action="store_true", help="do not delete this run's topics at the end")
    parser.add_argument("--no-live", action="store_true",
                        help=f"plain log lines (one every {PLAIN_LINE_EVERY_S:.0f} s) instead of the live view; "
                             "the default without a terminal")
    args = parser.parse_args(argv)
    if args.customers is None:
        args.customers = max(MIN_CUSTOMERS, round(args.rate * CUSTOMERS_PER_RATE))
    if args.detectors:
        from detectors import registry

        try:
            args.detectors = tuple(d.name for d in registry.resolve(args.detectors))
        except registry.UnknownDetectorError as error:
            parser.error(str(error))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run_id = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = args.out or REPO_ROOT / "artifacts" / "demo" / run_id
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    say = _printer()
    traffic = Traffic(seed=args.seed, duration=args.duration, rate=args.rate, customers=args.customers,
                      scenarios=DEMO_SCENARIOS)
    exit_code = 0
    settings = get_settings().replace(detector_warmup_s=max(0.0, args.warmup))
    diamond = LocalDiamond(settings, run_id, traffic, say, keep_topics=args.keep_topics,
                           detectors=args.detectors or ())
    try:
        with diamond:
            monitor = PipelineMonitor(diamond.settings)
            monitor.start()
            try:
                exit_code = _run(diamond, monitor, out, args, say, started)
            finally:
                monitor.stop()
    except KeyboardInterrupt:
        say("interrupted: everything stopped")
        exit_code = 130
    return exit_code or (1 if diamond.leftovers else 0)


def _run(diamond: LocalDiamond, monitor: PipelineMonitor, out: Path, args, say, started: float) -> int:
    from demo.report import write_report

    dashboard = dashboard_url(diamond.settings)
    say(f"dashboard: {dashboard}")
    say(metrics_urls(diamond.settings))
    say(f"publishing simulated transactions for {args.duration:.0f} s at {args.rate:.0f}/s ...")
    labels_path = out / "labels.jsonl"
    traffic_started = time.time()
    cpu_before = diamond.group.cpu_seconds()
    producer = diamond.publish(labels_path)
    _live_view(diamond, producer, monitor, dashboard, args, say)
    cpu_after = diamond.group.cpu_seconds()
    figures = monitor.snapshot()
    report = write_report(out, diamond.settings, labels_path, monitor, args, traffic_started,
                          wall_seconds=time.monotonic() - started,
                          cpu_seconds={name: round(cpu_after[name] - cpu_before.get(name, 0.0), 1)
                                       for name in cpu_after})
    say(report["summary_text"])
    say(f"report: {out / 'report.md'}")
    if args.keep_running:
        say(f"still running: dashboard {dashboard}  (Ctrl-C to stop everything)")
        wait_until(diamond.stopped_service, 10 ** 9, "Ctrl-C (or a service to stop)", interval=1)
    return 1 if figures["duplicate_alert_ids"] else 0


def _printer():
    def say(message: str) -> None:
        print(f"[{datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)
    return say


def _live_view(diamond: LocalDiamond, producer, monitor: PipelineMonitor, dashboard: str, args, say) -> None:
    """Refresh the figures until the producer is done and the pipeline has drained (``demo.drain``)."""
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

    drain = Drain(diamond.settings, diamond.writer_ids())
    deadline = time.monotonic() + args.duration + args.drain_timeout
    live = None if args.no_live or not sys.stdout.isatty() else Live(table(), refresh_per_second=2)
    plain_line = Every(PLAIN_LINE_EVERY_S)
    if live:
        live.start()
    try:
        while time.monotonic() < deadline:
            monitor.stopped.wait(timeout=REFRESH_S)
            diamond.check_services()
            if live:
                live.update(table())
            elif plain_line.due():
                f = monitor.snapshot()
                say(f"{f['transactions']:,} transactions ({f['transactions_per_second']:,}/s), "
                    f"alerts {f['alerts_by_detector']}, latency p50 / p99 {_seconds(f['latency_p50_s'])} / "
                    f"{_seconds(f['latency_p99_s'])}")
            if producer.proc.poll() is not None and drain.done():
                return
        say(f"the pipeline did not drain before the deadline (waiting for {drain.waiting_for()}): "
            "reporting what arrived")
    finally:
        drain.close()
        if live:
            live.stop()


def _open_cases(settings: Settings) -> int:
    import redis

    from common.redis_clients import redis_client
    from common.redis_keys import RedisKeys
    try:
        return redis_client(settings).zcard(RedisKeys(settings.sinks_namespace).open_cases)
    except redis.RedisError:
        return -1


def _seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f} s"


def _stack_errors() -> tuple[type[BaseException], ...]:
    from deploy.local_stack import StackError

    return (StackError,)


if __name__ == "__main__":
    sys.exit(run_command(main, "python -m demo", expected=_stack_errors()))
