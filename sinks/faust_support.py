"""What every downstream Faust service shares: the app factory, read_committed consumers, Redis
with retry.

Idempotent producer: Faust's at-least-once producer retries without Kafka's idempotence, so a retried
request that had in fact been written duplicates its records; ``_IdempotentProducer`` turns it on.

read_committed: faust-streaming has no setting for the consumer's isolation level; it reads
``read_committed`` only under ``processing_guarantee="exactly_once"``, which would also turn on its
per-partition transactional producers. The alert writers commit Kafka transactions (docs/architecture.md,
"Exactly once"), so our consumers must never see records of open or aborted transactions:
``ReadCommittedApp`` uses a transport whose consumer thread builds the aiokafka consumer with
``isolation_level="read_committed"`` through Faust's own code path, and nothing else changes.

Flow control: ``KeepDeliveredFlowControl`` keeps the events a stream holds when Faust resumes a flow
that is already running (the end of every table recovery); mode's version dropped them, and with
them, now and then, an alert after a restart of the case manager.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Awaitable, Callable, NoReturn, TypeVar

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlEvent

from common.kafka_clients import faust_broker_options
from common.settings import Settings
from sinks import metrics

log = logging.getLogger(__name__)
T = TypeVar("T")


class _ReadCommittedConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport):
        # Faust picks read_committed exactly when ``consumer.in_transaction`` is true; flip it only
        # for the construction of the aiokafka consumer (offsets are still committed normally).
        saved = self.consumer.in_transaction
        self.consumer.in_transaction = True
        try:
            return super()._create_worker_consumer(transport)
        finally:
            self.consumer.in_transaction = saved


class _ReadCommittedConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self):
        return _ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _IdempotentProducer(faust_aiokafka.Producer):
    """Faust's producer with Kafka's idempotence on under ``at_least_once`` too (Faust turns it on only
    for its transactions): the client's own retries of a request whose answer was lost (a timeout, a
    leader change while the broker starts) then cannot write a record twice."""

    def _settings_extra(self):
        return {**super()._settings_extra(), "acks": "all", "enable_idempotence": True}


class ReadCommittedTransport(faust_aiokafka.Transport):
    Consumer = _ReadCommittedConsumer
    Producer = _IdempotentProducer


class KeepDeliveredFlowControl(FlowControlEvent):
    """Faust's flow control, except that resuming a flow that is already running keeps what the
    streams' queues hold.

    mode's ``FlowControlEvent.resume()`` always empties every stream queue. At the end of a table
    recovery Faust resumes the stream partitions, seeks them to the committed offsets and only then
    calls ``resume()`` again, although the flow has been running since the recovery started: events
    delivered in between were dropped from the queues, while their offsets already counted as read,
    so the re-fetch after the seek skipped them as duplicates. Once a later event of the partition
    was acknowledged, Faust's commit (which lets one missing offset at the head pass, for
    transaction markers) moved past the dropped one: an alert lost for good, about once in 15
    restarts of the case manager (found by the chaos suite; ``tests/integration/test_faust_restarts.py``).
    Emptying the queues when the flow really was suspended (a rebalance) stays as it was.
    """

    def resume(self) -> None:
        if not self.is_active():
            super().resume()


class ReadCommittedApp(faust.App):
    """A ``faust.App`` whose consumers read with ``isolation_level="read_committed"`` and whose flow
    control keeps delivered events (``KeepDeliveredFlowControl``)."""

    def _new_transport(self):
        return ReadCommittedTransport(self.conf.broker_consumer, self)

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        return KeepDeliveredFlowControl(loop=self.loop)


def make_app(app_id: str, settings: Settings, **overrides: Any) -> ReadCommittedApp:
    """A Faust app configured from the settings: broker and credentials, replication 1 for its
    internal topics (changelogs, assignor), partitions of the alert topics, state under run_dir."""
    datadir = Path(settings.run_dir) / "faust" / app_id
    datadir.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = dict(
        faust_broker_options(settings),
        topic_replication_factor=settings.replication_factor,
        topic_partitions=settings.partitions_alerts,
        datadir=str(datadir),
        store="memory://",                # tables are rebuilt from their changelog topics on start
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        web_enabled=False,                # several workers share the host: no Faust web server port
        processing_guarantee="at_least_once",
        # A worker that died (SIGKILL, OOM) is noticed after 10 s instead of Faust's 60 s, so its
        # partitions move to a restarted or surviving worker quickly.
        broker_session_timeout=10.0,
        broker_heartbeat_interval=3.0,
    )
    options.update(overrides)
    return ReadCommittedApp(app_id, **options)


def main(app: faust.App, settings: Settings, serve_metrics: Callable[[], Any] | None = None) -> None:
    """Faust's command line for ``app`` (``worker``, ``agents``, ``tables``, ...).

    ``worker`` first declares the tables' changelog topics (``declare_changelogs``), and runs without
    Faust's own web server unless ``--with-web``/``--web-port`` is given: its fixed port 6066 would
    clash between the several workers of one host. ``--help`` connects to nothing: creating the app,
    its topics and tables does not, and the changelogs are declared only for a worker that starts,
    which also starts ``serve_metrics`` (the service's ``/metrics``, ``sinks.metrics.serve``).
    """
    argv = sys.argv[1:]
    if argv[:1] == ["worker"]:
        if not any(a in ("-h", "--help") for a in argv):
            declare_changelogs(app, settings)
            if serve_metrics is not None:
                serve_metrics()
        if not any(a.startswith(("--with-web", "--without-web", "--web-port")) for a in argv):
            sys.argv = [sys.argv[0], *argv, "--without-web"]
    app.main()


def declare_changelogs(app: faust.App, settings: Settings) -> None:
    """Create every table's changelog topic (compacted, the table's partitions) before the worker starts.

    Faust creates it itself while starting, but on a fresh broker its first partition assignment can
    run before the new topic is in the metadata ("Ignoring missing topic"): the changelog partitions
    are then never assigned, every table write raises ``PartitionsMismatch`` (0 partitions) and, with
    Faust's default agent supervisor, each failed event is acknowledged and lost. Seen in CI.
    """
    from common.kafka_admin import TopicSpec, create_topics, wait_for_partitions

    specs = [TopicSpec(table.changelog_topic_name, table.partitions or settings.partitions_alerts,
                       {"cleanup.policy": "compact"}) for table in app.tables.values()]
    if specs:
        create_topics(settings, specs)
        wait_for_partitions(settings, specs)


EXIT_AGENT_FAILED = 70


def exit_on_agent_error(what: str) -> NoReturn:
    """End the worker process at once, without acknowledging the event in hand (call it from an
    ``except`` in an agent's loop).

    Faust's default restarts a crashed agent and acknowledges the event it failed on, so that event is
    silently lost. Exiting instead leaves the offset uncommitted: whoever runs the worker restarts it
    (``make demo``, compose's ``restart: unless-stopped``) and the event is processed again.
    """
    # Straight to stderr (the worker's log): logging's handlers are not flushed by os._exit.
    sys.stderr.write(f"{what} failed; exiting ({EXIT_AGENT_FAILED}) so that the event is redelivered\n"
                     f"{traceback.format_exc()}")
    sys.stderr.flush()
    os._exit(EXIT_AGENT_FAILED)


def redis_errors() -> tuple[type[BaseException], ...]:
    import redis.exceptions

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, ConnectionError,
            OSError, asyncio.TimeoutError)


def permanent_redis_errors() -> tuple[type[BaseException], ...]:
    """Errors that are subclasses of ``ConnectionError`` in redis-py but are not transient."""
    import redis.exceptions

    return (redis.exceptions.AuthenticationError, redis.exceptions.AuthorizationError)


async def retry_forever(what: str, operation: Callable[[], Awaitable[T]],
                        retry_on: tuple[type[BaseException], ...] | None = None,
                        first_delay: float = 0.1, max_delay: float = 5.0,
                        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> T:
    """Run ``operation`` until it succeeds, backing off exponentially (``first_delay`` doubling up to
    ``max_delay``) on the transient errors ``retry_on`` (default: Redis unreachable).

    The agent waits here, so its events are not acknowledged and its offsets not committed while
    Redis is down: nothing is skipped, processing resumes where it stopped.
    """
    retry_on = retry_on or redis_errors()
    delay = first_delay
    attempt = 0
    while True:
        try:
            return await operation()
        except retry_on as exc:
            if isinstance(exc, permanent_redis_errors()):
                metrics.redis_failed()
                raise                  # a wrong password does not get better by waiting: fail loudly
            metrics.retried(what)
            attempt += 1
            log.warning("%s failed (attempt %d: %s); retrying in %.1f s", what, attempt, exc, delay)
            await sleep(delay)  # backoff pacing between retries, not a guess at a duration
            delay = min(max_delay, delay * 2)


def redis_client(settings: Settings):
    from common.redis_clients import async_redis_client

    return async_redis_client(settings, decode_responses=True, socket_connect_timeout=2.0, socket_timeout=5.0)
