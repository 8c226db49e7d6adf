"""The whole diamond for one run on the embedded local stack: the building blocks of ``make demo`` and
of the end-to-end suite's local target.

``Traffic`` is the simulated stream of a run (the ``python -m producers`` arguments). ``LocalDiamond``
is a context manager: entering starts Kafka and Redis (if they are not up), creates the run's own
topics (``run_settings``: own topics, consumer groups, Redis namespace, checkpoints and run folder,
so runs never mix), loads the reference profiles, trains a quick model if the ML detector has none
(``TRAIN_QUICK``, its progress said line by line), starts the detector job, the enricher, the case
manager and the dashboard, and waits until every detector query has reported progress and the
dashboard answers. ``publish`` starts the producer. Leaving stops every process it started (also on
an error, Ctrl-C or SIGTERM), records what was left behind in ``leftovers`` and deletes the run's
topics (unless ``keep_topics``).
"""

from __future__ import annotations

import signal
import sys
import urllib.request
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from common.contracts import format_event_time
from common.kafka_admin import delete_topics
from common.settings import Settings
from common.waiting import wait_until
from deploy import local_stack
from deploy.processes import Child, ProcessGroup
from deploy.topics import create_project_topics, project_topics

SERVICES = ("detectors", "enricher", "cases", "dashboard")
DETECTORS, STANDBY = "detectors", "detectors-standby"     # the detector job, and its standby (spark_job.leadership)
DETECTOR_JOBS = (DETECTORS, STANDBY)
SERVICE_START_TIMEOUT = 420.0      # Spark's cold start and first micro-batches on 2 shared cores
# The model the demo trains when none is registered: the quick preset (one fold, one candidate; ~30 s on
# 2 cores), registered like any other; no report, so `make train`'s artifacts/models/report.md stays.
TRAIN_QUICK = ["-m", "models", "train", "--quick", "--no-report"]


def is_training_progress(line: str) -> bool:
    """The lines of ``python -m models train`` worth showing: its steps ("[3/4] ...") and the result."""
    return line.startswith("[") or line.startswith("registered ")


class LogLines:
    """The complete lines a child process added to its log since the last call."""

    def __init__(self, path: Path):
        self.path, self.partial = path, b""
        self.offset = path.stat().st_size if path.exists() else 0

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as log:
                log.seek(self.offset)
                data = log.read()
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [line.decode(errors="replace").rstrip("\r") for line in lines if line.strip()]


@dataclass(frozen=True)
class Traffic:
    """The simulated stream of one run."""

    seed: int = 7
    duration: float = 60.0                  # wall-clock seconds of publishing
    rate: float = 1000.0                    # transactions per second
    customers: int | None = None            # None: the simulator's default (10,000)
    scenarios: tuple[str, ...] = ()         # NAME=RATE overrides of the scenario rates
    id_prefix: str = ""                     # prefixes every id: keeps runs on one stack apart
    start: datetime | None = None           # first simulated moment; None: the simulator's fixed day
    late_fraction: float | None = None      # None: the simulator's default (0.5 % arrive minutes late)
    jitter_seconds: float | None = None     # None: the simulator's default (up to 3 s out of order)
    count: int | None = None                # this many transactions however long they take, instead of duration

    @property
    def transactions(self) -> int:
        """How many transactions the run publishes (about, when bounded by ``duration``)."""
        return self.count if self.count else int(self.duration * self.rate)

    def world_args(self) -> list[str]:
        args = ["--seed", str(self.seed)]
        if self.customers:
            args += ["--customers", str(self.customers)]
        if self.id_prefix:
            args += ["--id-prefix", self.id_prefix]
        if self.start:
            args += ["--start", format_event_time(self.start)]
        return args

    def reference_args(self) -> list[str]:
        return ["-m", "producers", "load-reference", *self.world_args()]

    def simulate_args(self, labels_path: Path) -> list[str]:
        """Every label goes to ``labels_path`` (the ground truth), none to Kafka."""
        bound = ["--count", str(self.count)] if self.count else ["--duration", str(self.duration)]
        args = ["-m", "producers", "simulate", *self.world_args(), *bound, "--rate", str(self.rate),
                "--labels-out", str(labels_path), "--no-labels-topic", "--no-progress"]
        for scenario in self.scenarios:
            args += ["--scenario", scenario]
        if self.late_fraction is not None:
            args += ["--late-fraction", str(self.late_fraction)]
        if self.jitter_seconds is not None:
            args += ["--jitter-seconds", str(self.jitter_seconds)]
        return args


def run_settings(base: Settings, run_id: str, prefix: str = "demo") -> Settings:
    """This run's own topics, consumer groups, Redis namespace, checkpoints and run folder."""
    name = f"{prefix}-{run_id}"
    return base.replace(
        topic_transactions=f"{name}.transactions", topic_labels=f"{name}.transactions.labels",
        topic_dlq=f"{name}.transactions.dlq", topic_alerts=f"{name}.alerts",
        topic_alert_markers=f"{name}.alerts.markers", topic_alerts_enriched=f"{name}.alerts.enriched",
        topic_cases=f"{name}.cases", sinks_namespace=name,
        enricher_app_id=f"{name}-enricher", cases_app_id=f"{name}-cases",
        run_dir=base.run_dir / prefix / run_id, checkpoint_root=str(base.run_dir / prefix / run_id / "checkpoints"))


def run_topic_names(settings: Settings) -> list[str]:
    """Every topic of a deployment on the broker: the project's, and the Faust services' own
    (changelogs, leader topics), whose names start with their app ids."""
    from common.kafka_admin import admin_client

    with admin_client(settings) as admin:
        existing = set(admin.list_topics())
    project = {spec.name for spec in project_topics(settings)}
    faust = {t for t in existing if t.startswith((f"{settings.enricher_app_id}-", f"{settings.cases_app_id}-"))}
    return sorted((project & existing) | faust)


def dashboard_url(settings: Settings) -> str:
    return f"http://{settings.dashboard_host}:{settings.dashboard_port}/"


def dashboard_answers(settings: Settings) -> bool:
    try:
        with urllib.request.urlopen(dashboard_url(settings) + "healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class LocalDiamond:
    def __init__(self, base: Settings, run_id: str, traffic: Traffic, say: Callable[[str], None],
                 prefix: str = "demo", keep_topics: bool = False, detectors: tuple[str, ...] = (),
                 standby: bool = False):
        self.base = base
        self.detectors = detectors            # the detector job's detectors (empty: every registered one)
        self.settings = run_settings(base, run_id, prefix)
        self.env = self.settings.to_env()
        self.traffic = traffic
        self.say = say
        self.keep_topics = keep_topics
        self.group = ProcessGroup(self.settings.run_dir / "logs", base_env=None)
        self.leftovers: list[str] | None = None
        self.retired: set[str] = set()
        self.services = SERVICES               # what start_services starts (and stopped_service watches)
        if standby:                            # a second detector job, warm, waiting to take over
            self.services = (*SERVICES, STANDBY)

    # -- entering: everything up ---------------------------------------------------------------
    def __enter__(self) -> "LocalDiamond":
        self.start_stack()
        create_project_topics(self.settings)
        self.group.__enter__()
        try:
            self.say("loading reference profiles into Redis ...")
            self.run_to_end("load-reference", self.traffic.reference_args())
            self._train_model_if_missing()
            self.say("starting the detector job, the enricher, the case manager and the dashboard ...")
            if self.settings.detector_warmup_s > 0:
                self.say(f"  the detector job first rehearses its queries on sample transactions for "
                         f"{self.settings.detector_warmup_s:.0f} s, on topics of their own (a warm-up; --warmup 0 "
                         f"for none)")
            self.start_services()
            self._wait_for_services()
        except BaseException:
            self.__exit__(*sys.exc_info())
            raise
        return self

    def start_stack(self) -> None:
        """Kafka and Redis (the local stack; a cluster's diamond has its own)."""
        self.say("starting the local stack (Kafka, Redis) ...")
        local_stack.up(self.base, log=lambda msg: self.say(f"  {msg}"))

    def start_services(self) -> None:
        for name in DETECTOR_JOBS if STANDBY in self.services else (DETECTORS,):
            self.group.start(name, ["-m", "detectors", "run", *self.detectors], self.env)
        self.group.start("enricher", ["-m", "sinks.enricher", "worker", "--without-web", "-l", "warn"], self.env)
        self.group.start("cases", ["-m", "sinks.cases", "worker", "--without-web", "-l", "warn"], self.env)
        self.group.start("dashboard", ["-m", "sinks.dashboard"], self.env)

    def run_to_end(self, name: str, args: list[str], timeout: float = 900,
                   relay: Callable[[str], bool] | None = None) -> None:
        """Run ``python args...`` to its end; each new line of its log for which ``relay`` is true is said."""
        follow = LogLines(self.group.log_dir / f"{name}.log")       # from its end: only what comes now
        child = self.group.start(name, args, self.env)

        def finished() -> bool:
            done = child.proc.poll() is not None
            for line in follow.new_lines() if relay else ():
                if relay(line):
                    self.say(f"  {line}")
            return done

        wait_until(finished, timeout, name, interval=0.2)
        if child.proc.returncode != 0:
            raise RuntimeError(f"{name} failed (exit {child.proc.returncode}):\n{child.tail()}")

    def _train_model_if_missing(self) -> None:
        from detectors import registry

        if "ml_score" not in (self.detectors or registry.names()):
            return
        from models.registry import latest_version  # only when the ML detector is registered

        if latest_version(self.settings.model_registry) is None:
            self.say("no model registered: training a quick one (under a minute; `make train` for the "
                     "full protocol) ...")
            self.run_to_end("train", TRAIN_QUICK, relay=is_training_progress)

    def _wait_for_services(self) -> None:
        """Every query of the detector job has reported progress, the dashboard answers, and the standby
        (if any) stands by."""
        expected = set(self.writer_ids())
        progress_dir = self.settings.run_dir / "progress"

        def ready() -> bool:
            self.check_services()
            started = {p.stem for p in progress_dir.glob("*.json")} if progress_dir.exists() else set()
            return expected <= started and dashboard_answers(self.settings) and self.standing_by() is not False

        wait_until(ready, SERVICE_START_TIMEOUT, "the detector queries, the dashboard and the standby", interval=0.5)

    # -- the detector job and its standby -----------------------------------------------------
    def leading_job(self) -> str:
        """Which of the detector job's services holds the lease (runs the queries): the running one whose
        run said so, whichever the lease (a file lock or a Kafka group) and however it was started."""
        from spark_job.leadership import LEADING

        jobs = [self.group.children[name] for name in DETECTOR_JOBS if name in self.group.children]
        return next((child.name for child in jobs if child.running() and f" {LEADING}: " in child.output()), DETECTORS)

    def standing_by(self) -> bool | None:
        """Whether the job that does not lead has rehearsed and waits for the lock (None: no standby)."""
        from spark_job.leadership import STANDING_BY

        if STANDBY not in self.services:
            return None
        other = STANDBY if self.leading_job() == DETECTORS else DETECTORS
        child = self.group.children.get(other)
        if child is None or not child.running():
            return False
        return f" {STANDING_BY}: " in child.output()

    # -- while running ------------------------------------------------------------------------
    def writer_ids(self) -> list[str]:
        """The exactly-once writers (queries) of the detector job."""
        from demo.drain import writer_ids

        return writer_ids(self.detectors or None)

    def stopped_service(self) -> str | None:
        """The name of a service that is no longer running (and was not retired), if any."""
        return next((name for name in self.services if name in self.group.children and name not in self.retired
                     and self.group.children[name].proc.poll() is not None), None)

    def retire_detector_jobs(self) -> None:
        """Retire the detector job, its standby first (which would take over from a retired leader)."""
        leader = self.leading_job()
        for name in sorted(set(DETECTOR_JOBS) & set(self.services), key=lambda name: name == leader):
            self.retire(name)

    def retire(self, name: str) -> None:
        """Stop ``name`` for good (SIGTERM) once its work is done; it no longer counts as died."""
        self.retired.add(name)
        self.group.kill(name, signal.SIGTERM)

    def check_services(self) -> None:
        """Raise if a service has died (with the tail of its log)."""
        name = self.stopped_service()
        if name is not None:
            child = self.group.children[name]
            raise RuntimeError(f"{name} died (exit {child.proc.returncode}):\n{child.tail()}")

    def publish(self, labels_path: Path) -> Child:
        """Start the producer: the traffic to this run's transactions topic, every label to ``labels_path``."""
        return self.group.start("producer", self.traffic.simulate_args(labels_path), self.env)

    @property
    def log_dir(self) -> Path:
        return self.group.log_dir

    # -- leaving: everything down --------------------------------------------------------------
    def __exit__(self, *exc) -> None:
        try:
            self.group.__exit__(*exc)            # stops every child, SIGTERM then SIGKILL
        finally:
            self.leftovers = self.group.leftovers()
            self.say("all processes stopped" if not self.leftovers else
                     f"processes left behind: {self.leftovers}")
            if not self.keep_topics:
                try:
                    delete_topics(self.base, run_topic_names(self.settings))
                except Exception as error:  # never hide why the run ended
                    self.say(f"could not delete the run's topics: {error}")
