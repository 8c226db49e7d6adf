"""Supervision: a failed query is restarted from its checkpoint with back-off; the others run on."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

log = logging.getLogger("spark_job.supervision")


@dataclass(frozen=True)
class FailedStart:
    """A query that could not start (at the job's start, or started again with new parameters): supervised
    as a failed query, restarted under the policy, never left stopped."""

    name: str
    error: str


@dataclass
class RestartPolicy:
    """When a failed query is started again from its checkpoint: after a back-off that doubles with
    each failure in a row (1, 2, 4 ... 30 s), so a broker that is restarting has time to come back,
    and at most ``max_failures`` times within ``window_s``: a query that keeps failing stays stopped
    (and the job says so) instead of spinning. A failure while no Kafka broker answers is not the
    query's: it is not counted, and the query is tried again every ``outage_retry_s`` for as long as
    the outage lasts."""

    max_failures: int = 6
    window_s: float = 600.0
    first_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    outage_retry_s: float = 5.0
    failures: dict[str, list[float]] = field(default_factory=dict)

    def next_attempt(self, name: str, now: float, broker_away: bool = False) -> float | None:
        """Record a failure of ``name`` at ``now``; the moment to restart it, or None: give up."""
        if broker_away:
            return now + self.outage_retry_s
        recent = [t for t in self.failures.get(name, []) if now - t < self.window_s] + [now]
        self.failures[name] = recent
        if len(recent) > self.max_failures:
            return None
        return now + min(self.max_backoff_s, self.first_backoff_s * 2 ** (len(recent) - 1))


def supervise(spark: SparkSession, queries: list, restart: Callable[[str, str], list] | None,
              until: Callable[[], bool] = lambda: False, policy: RestartPolicy | None = None,
              poll_seconds: float = 1.0, clock: Callable[[], float] = time.monotonic,
              tick: Callable[[], list] | None = None, broker_away: Callable[[], bool] = lambda: False) -> int:
    """Watch the queries (a ``FailedStart`` among them: one that could not start) until ``until()`` or all
    stopped. A query that fails is logged and, with
    ``restart(name, error)`` (which returns the queries it started: the query again, and possibly a
    query for a detector it set apart), started again from its checkpoint when ``policy`` allows; the
    others keep running either way. ``tick()``, called every round, returns queries it restarted on
    purpose (new parameters: ``spark_job.live_params``), which replace those of the same name, or a
    ``FailedStart`` for one whose new start failed. ``broker_away()``, asked after a failure, says whether no
    Kafka broker answers (the failure is then not counted). Returns the number of queries that ended with an
    error."""
    policy = policy or RestartPolicy()
    failed = 0
    active: dict[str, object] = {}
    pending: dict[str, tuple[float, str]] = {}      # name -> (when to restart it, the error that stopped it)

    def failure(name: str, error: str) -> None:
        nonlocal failed
        away = restart is not None and broker_away()
        due = policy.next_attempt(name, clock(), broker_away=away) if restart is not None else None
        first_line = error.splitlines()[0] if error else error
        if due is None:
            log.error("query %s failed: %s; not restarted", name, first_line)
            failed += 1
        else:
            log.error("query %s failed: %s; %srestarting it from its checkpoint in %.0f s", name, first_line,
                      "no Kafka broker answers (not counted against its restarts): " if away else "",
                      due - clock())
            pending[name] = (due, error)

    def take(started: list) -> None:
        for query in started:
            if isinstance(query, FailedStart):
                active.pop(query.name, None)
                failure(query.name, query.error)
            else:
                active[query.name] = query

    take(queries)
    while (active or pending) and not until():
        if tick is not None:
            try:
                take(tick())
            except Exception as error:  # e.g. the broker is away: parameters are followed again next round
                log.warning("following the parameters failed: %s", error)
        for name, query in list(active.items()):
            if query.isActive:
                continue
            del active[name]
            error = query.exception()
            if error is not None:
                failure(name, str(error))
        for name, (due, error) in list(pending.items()):
            if clock() >= due:
                del pending[name]
                try:
                    active.update((q.name, q) for q in restart(name, error))
                except Exception as restart_error:  # e.g. the broker is still away: try again later
                    failure(name, f"restart failed: {restart_error}")
        if active:
            try:
                spark.streams.awaitAnyTermination(timeout=poll_seconds)
            except StreamingQueryException:
                pass                                # it rethrows a failed query's error: handled above
            spark.streams.resetTerminated()
        else:
            time.sleep(poll_seconds)                # only restarts are due: nothing to wait on
    return failed
