"""The detector job, as its ``run`` reads: lead or stand by → plan → start → supervise.

A job that finds the checkpoint root's leader lock held stands by (``spark_job.leadership``) with its
queries planned, and takes over when the leader goes. Planning applies the parameters in force
(``spark_job.live_params``) and builds each query once (``JobQueries``); supervision restarts a failed query
from its checkpoint under the restart policy (``spark_job.supervision``) and follows parameter changes.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import signal
import time
from typing import Sequence

from spark_job.options import from_arguments

log = logging.getLogger("spark_job")


def run(names: Sequence[str], args: argparse.Namespace) -> int:
    """The detector job for the detectors ``names`` (all when empty): lead or stand by → plan → start →
    supervise. Its exit status."""
    from common.settings import get_settings
    from common.spark import get_spark
    from detectors import registry

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)    # a line per callback from the JVM otherwise
    settings = get_settings()
    detectors = [registry.get(name) for name in names] if names else registry.all()
    options = from_arguments(args, settings.detector_groups, settings.detector_max_offsets_per_trigger,
                             settings.detector_group_triggers)
    leadership, standby = lead_or_stand_by(settings, options)
    spark = get_spark("fraud-detectors", settings)
    stopping = StopRequest(spark)
    signal.signal(signal.SIGTERM, stopping)      # from here on, a stop is a clean one, also while planning

    def interrupted() -> str | None:             # what ends the rehearsal early
        if stopping.requested():
            return "the job is stopping"
        if standby and leadership.try_lead():
            return "the leader has gone: this job takes over"
        return None

    try:
        job, follower = plan(spark, detectors, settings, options, standby, interrupted)
        try:
            if stopping.requested() or not leadership.lead(stopping.requested):
                log.info("stopped before its queries started")
                _stop(spark)
                return 0
            return start_and_supervise(spark, job, follower, settings, args.duration, stopping, leadership)
        finally:
            follower.close()
    finally:
        leadership.release()


def lead_or_stand_by(settings, options):
    """The lease of the checkpoint root, taken now if it is free: (the lease, whether this job is a
    standby)."""
    from spark_job.leadership import leadership_for

    leadership = leadership_for(settings, options.checkpoint_root or settings.checkpoint_root)
    return leadership, not leadership.try_lead()


def plan(spark, detectors: Sequence, settings, options, standby: bool, interrupted=lambda: None):
    """The job's queries (``JobQueries``) with the parameters in force, built once, and the follower of the
    parameters topic. A standby whose broker is away waits for it rather than exit: it has nothing to do
    before it can reach it, and the leader meanwhile rides the outage out (spark_job.supervision). The
    rehearsal ends early when ``interrupted()`` says why."""
    from detectors.params import as_data
    from spark_job.live_params import RedisParams, applied_entry, follow_params
    from spark_job.parsing import fast_clock_warning
    from spark_job.tuning.rehearsal import warm_up

    follower, in_force = follow_params(settings, wait=standby)
    job = JobQueries(spark, detectors, settings, options)
    warning = fast_clock_warning(settings.event_time_max_ahead_s, job.detectors)
    if warning:
        log.warning(warning)
    publish = RedisParams(settings)
    job.on_params = lambda detector, record: publish(detector.name, applied_entry(record, as_data(detector)))
    job.apply_params(in_force)                    # before any query starts: nothing to restart
    for detector in job.detectors:
        if detector.name not in in_force:
            job.on_params(detector, None)
    warm_up(spark, list(job.plans.values()), job.detectors, settings, options, settings.detector_warmup_s,
            interrupted=interrupted)
    job.prepare_all()
    return job, follower


def start_and_supervise(spark, job: JobQueries, follower, settings, duration_s: float, stopping, leadership) -> int:
    """Start the job's queries and supervise them until stopped (or ``duration_s``), or until ``leadership``
    is lost (nothing is started again then); the exit status."""
    from common.kafka_clients import kafka_unreachable
    from spark_job.leadership import LEASE_LOST
    from spark_job.metrics import start_job_metrics
    from spark_job.progress import ProgressListener, RedisProgress
    from spark_job.supervision import supervise

    # Only the leading job serves metrics and reports progress (a standby's port would clash).
    metrics = start_job_metrics(settings)
    job.params_refused = metrics.params_refused if metrics is not None else None
    listener = ProgressListener(settings.run_dir / "progress", publish=RedisProgress(settings), metrics=metrics)
    spark.streams.addListener(listener.listener)
    job.apply_params(follower.poll())             # what changed while it rehearsed or stood by
    queries = job.start_all()
    log.info("running %s", ", ".join(q.name for q in queries))
    stop_at = time.monotonic() + duration_s if duration_s else None
    rule_times = RuleTimes(spark, settings.spark_rule_times_file)
    lost = []

    def until() -> bool:
        rule_times.write_when_due()
        if not leadership.held():
            lost.append(time.monotonic())
            return True
        return stopping.requested() or (stop_at is not None and time.monotonic() > stop_at)

    counted = metrics.counting_restarts(job.restart) if metrics is not None else job.restart

    def restart(name: str, error: str = "") -> list:
        return counted(name, error) if leadership.held() else []     # never started without the lease

    try:
        failed = supervise(spark, queries, restart, until=until, tick=lambda: job.apply_params(follower.poll()),
                           broker_away=lambda: kafka_unreachable(settings))
    except KeyboardInterrupt:
        failed = 0
    except Exception:
        if not (stopping.requested() and _context_stopped(spark)):
            raise
        failed = 0       # the signal reached the JVM too, and it went first: a stop, not a failure
    finally:
        _stop(spark)
    if lost:
        log.error("lost the lease of %s to another job: every query stopped; start this job again to stand by",
                  leadership.root)
        return LEASE_LOST
    return 1 if failed else 0


class JobQueries:
    """The job's queries (``plan_queries``), started and restarted by name. A query of several
    detectors that failed because of one of them is restarted without it, and that detector runs alone
    (``spark_job.quarantine``)."""

    def __init__(self, spark, detectors: Sequence, settings, options):
        from spark_job.options import plan_queries

        self.spark, self.detectors, self.settings, self.options = spark, list(detectors), settings, options
        self.plans = {plan.name: plan for plan in plan_queries([d.name for d in self.detectors], options)}
        self.running: dict[str, object] = {}
        self.quarantined: dict[str, tuple] = {}        # query name -> (the detector set apart, its options)
        self.prepared: dict[str, object] = {}          # query name -> its rows, built before its first start
        self.params_refused = None                     # the job's metric (spark_job.metrics), when served

    def prepare_all(self) -> None:
        """Build every planned query's DataFrame now (a standby: before it takes over), for its first start.
        One that cannot be built is left to its start, which meets the error again."""
        from spark_job.queries import planned_rows

        for name, plan in self.plans.items():
            if name in self.prepared:                  # built when its parameters were applied
                continue
            try:
                self.prepared[name] = planned_rows(self.spark, plan, self.detectors, self.settings, self.options)
            except Exception as error:  # noqa: BLE001 - raised again, where it is handled, by its start
                log.warning("query %s not prepared: %s", name, str(error).splitlines()[0])

    def start_all(self) -> list:
        """Every planned query started; one that cannot start is a ``FailedStart``, for the supervisor to
        restart under its policy while the others run (not an exception that stops the job)."""
        from spark_job.supervision import FailedStart

        started = []
        for name in self.plans:
            try:
                started.append(self._start(name))
            except Exception as error:  # noqa: BLE001 - the broker away, a checkpoint that does not fit
                started.append(FailedStart(name, f"start failed: {error}"))
        return started

    def restart(self, name: str, error: str = "") -> list:
        from spark_job import quarantine, query_names

        plan = self.plans.get(name)
        if plan is None:                               # a quarantined detector's own query
            return [self._start(name)]
        members = [d for d in self.detectors if d.name in plan.detectors and d.name not in plan.muted]
        guilty = quarantine.culprit(error, members) if len(members) > 1 else None
        if guilty is None:
            return [self._start(name)]
        from common.settings import checkpoint_location

        alone = query_names.quarantined(guilty.name)
        root = self.options.checkpoint_root or self.settings.checkpoint_root
        start_at = (quarantine.offsets_committed(checkpoint_location(root, name))
                    or quarantine.offsets_read(self.running[name]) or self.options.starting_offsets)
        quarantine.forget_checkpoint(self.spark, checkpoint_location(root, alone))
        log.error("query %s failed in %s: restarting it without %s, which goes on alone in %s",
                  name, quarantine.module_file(guilty), guilty.name, alone)
        self.plans[name] = dataclasses.replace(plan, muted=(*plan.muted, guilty.name))
        # Alone, it keeps its group's trigger (a lone query has the job's).
        self.quarantined[alone] = (guilty, dataclasses.replace(self.options, starting_offsets=start_at,
                                                               trigger_seconds=plan.trigger_seconds))
        return [self._start(name), self._start(alone)]

    def apply_params(self, records: dict) -> list:
        """Run the parameter sets ``records`` (detector -> ``ParamRecord``): each running query of a
        changed detector is planned with them, stopped and started again from its checkpoint; the job's
        other queries are not touched (``spark_job.live_params``). A set a query cannot be planned with is
        refused: its detector keeps its last good version, the running query is not stopped, one line and
        ``fraud_detector_params_refused`` say so. Returns the queries it started, and a ``FailedStart``
        for one whose start failed (the supervisor restarts it under its policy)."""
        from detectors.params import ParamError, as_data, tuned
        from spark_job.supervision import FailedStart

        changed, previous = {}, {d.name: d for d in self.detectors}
        for i, detector in enumerate(self.detectors):
            record = records.get(detector.name)
            if record is None or (record.version, record.params) == (detector.params_version, as_data(detector)):
                continue                      # already running these
            try:
                self.detectors[i] = changed[detector.name] = tuned(detector, record)
            except ParamError as error:
                log.error("parameters v%d of %s not applied: %s", record.version, detector.name, error)
        for name, plan in self.plans.items():      # planned first: a set that cannot be is refused
            if set(plan.detectors) & set(changed):
                self.prepared.pop(name, None)          # built with the parameters before
                self._plan_or_keep(name, changed, previous, records)
        for name, (detector, options) in list(self.quarantined.items()):
            if detector.name in changed:
                self.quarantined[name] = (changed[detector.name], options)
        affected = [name for name, plan in self.plans.items() if set(plan.detectors) & set(changed)]
        affected += [name for name, (d, _) in self.quarantined.items() if d.name in changed]
        started = []
        for name in affected:
            query = self.running.get(name)
            if query is None or not query.isActive:
                continue                      # failed, its restart is due: it starts with the parameters in force
            began = time.monotonic()
            query.stop()
            try:
                started.append(self._start(name))
            except Exception as error:  # noqa: BLE001 - e.g. the broker away while the writer opens
                started.append(FailedStart(name, f"start with new parameters failed: {error}"))
                continue
            log.info("query %s restarted from its checkpoint with new parameters (%s) in %.1f s", name,
                     ", ".join(f"{d} v{changed[d].params_version}" for d in changed), time.monotonic() - began)
        for detector in changed.values():
            self.on_params(detector, records[detector.name])
        return started

    def _plan_or_keep(self, name: str, changed: dict, previous: dict, records: dict) -> None:
        """Build query ``name`` with the changed detectors (kept for its start); when that fails, its
        changed detectors go back to their previous versions (out of ``changed``), and it is said."""
        from spark_job.queries import planned_rows

        try:
            self.prepared[name] = planned_rows(self.spark, self.plans[name], self.detectors, self.settings,
                                               self.options)
            return
        except Exception as error:  # noqa: BLE001 - a value the ranges let through and the plan does not
            reason = (str(error).splitlines() or [type(error).__name__])[0][:300]
        for detector_name in set(self.plans[name].detectors) & set(changed):
            kept = previous[detector_name]
            self.detectors = [kept if d.name == detector_name else d for d in self.detectors]
            changed.pop(detector_name)
            log.error("parameters v%d of %s refused: the query %s cannot be planned with them (%s); it keeps v%d",
                      records[detector_name].version, detector_name, name, reason, kept.params_version)
            if self.params_refused is not None:
                self.params_refused.labels(detector_name).inc()

    def on_params(self, detector, record) -> None:
        """Told the parameters ``detector`` runs with (the dashboard's ``{ns}:params``); nothing by default."""

    def _start(self, name: str):
        from spark_job.options import QueryPlan
        from spark_job.queries import start_planned_query

        if name in self.quarantined:
            detector, options = self.quarantined[name]
            plan = QueryPlan(name, (detector.name,), trigger_seconds=options.trigger_seconds)
            query = start_planned_query(self.spark, plan, [detector], self.settings, options)
        else:
            query = start_planned_query(self.spark, self.plans[name], self.detectors, self.settings, self.options,
                                        rows=self.prepared.pop(name, None))
        self.running[name] = query
        return query


class StopRequest:
    """The SIGTERM handler: the job stops at its next check. The JVM may be stopping too (one process
    group): py4j's and PySpark's accumulator server's tracebacks of the connections it closes say nothing then."""

    def __init__(self, spark):
        self.spark, self.now = spark, False

    def __call__(self, *_) -> None:
        self.now = True
        logging.getLogger().addFilter(QUIET_LOST_JVM)
        server = getattr(self.spark.sparkContext, "_accumulatorServer", None)
        if server is not None:
            server.handle_error = lambda request, client_address: None

    def requested(self) -> bool:
        return self.now


def _stop(spark) -> None:
    """Stop the queries and the session, unless the JVM got there first: a signal to the job's process group
    (``make demo`` stopping) reaches the JVM too, whose shutdown hook stops the context."""
    root = logging.getLogger()
    added = QUIET_LOST_JVM not in root.filters        # a stop signal has put it there for good already
    root.addFilter(QUIET_LOST_JVM)                    # py4j logs a lost JVM's traceback on the root logger
    try:
        for query in spark.streams.active:
            query.stop()
        spark.stop()
    except Exception:
        if not _context_stopped(spark):
            raise
        log.info("the JVM stopped the Spark session first (a stop signal to the job's processes)")
    finally:
        if added:
            root.removeFilter(QUIET_LOST_JVM)


class _Py4JSendErrors(logging.Filter):
    """Leaves out py4j's "Exception while sending command." records: while the job stops, a JVM that has
    exited is expected, and any other failure is raised by the job itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "Exception while sending command."


QUIET_LOST_JVM = _Py4JSendErrors()


def _context_stopped(spark) -> bool:
    try:
        return bool(spark.sparkContext._jsc.sc().isStopped())
    except Exception:  # noqa: BLE001 - the JVM itself is gone
        return True



class RuleTimes:
    """Spark's cumulative time per analyzer/optimizer rule in this JVM (``RuleExecutor.dumpTimeSpent``), written
    to ``path`` every ``every_s`` seconds while the job runs (it is stopped by a signal to its process
    group, JVM included, so there is no last chance at the end). No path: nothing."""

    def __init__(self, spark, path: str, every_s: float = 10.0):
        self.spark, self.path, self.every_s, self.next_at = spark, path, every_s, time.monotonic() + every_s

    def write_when_due(self) -> None:
        if not self.path or time.monotonic() < self.next_at:
            return
        self.next_at = time.monotonic() + self.every_s
        from pathlib import Path

        try:
            text = self.spark._jvm.org.apache.spark.sql.catalyst.rules.RuleExecutor.dumpTimeSpent()
            Path(self.path).write_text(text)
        except Exception as error:   # a diagnostic must not stop the job
            log.warning("could not write the rule times to %s: %s", self.path, error)
