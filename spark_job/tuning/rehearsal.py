"""A rehearsal before the job's queries start: the same queries, on throw-away topics, fed sample transactions.

A fresh JVM runs a streaming query's first minute slowly: the JIT compiles the Kafka source, the validation,
the keyed operators and their state stores, the exactly-once writer's path and the Python workers' code
(pandas, the model) while the first live micro-batches wait for it (docs/performance.md, "A warm job"). So,
for ``Settings.detector_warmup_s`` seconds, the job runs its own query plans under other names, reading a
topic of its own to which it publishes ``detectors.samples`` transactions (every rule detector's pattern in
them) at a steady pace, and writing through the exactly-once writer to topics of their own. Then it stops
them and deletes their topics and checkpoints: nothing of the rehearsal reaches the job's topics, progress
files or metrics. A rehearsal query that fails is logged; the job starts anyway (its live query meets the
failure again and the quarantine sets the detector apart). It ends early, and cleans up all the same, when the
job is asked to stop or a standby's leader goes (``interrupted``): a standby never waits for its rehearsal
to take over.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import shutil
import time
import uuid
from datetime import timedelta
from typing import Callable, Sequence

from spark_job import query_names

log = logging.getLogger(__name__)

CARDS = 40              # each with an ordinary history, an amount spike, a burst, a double swipe, a journey
PACE_PER_S = 100        # transactions a second published to the rehearsal's topic
DRAIN_S = 60.0          # after publishing, how long the rehearsal queries get to read the rest


def warmup_transactions(round_: int = 0) -> list[dict]:
    """About 1,200 transactions over 40 cards in which every built-in detector finds its pattern
    (``detectors.samples``); round ``n`` has its own cards, two days after round ``n - 1``, so each round
    builds state, alerts, and lets the watermark evict the round before."""
    from detectors import samples

    txns: list[dict] = []
    for i in range(CARDS):
        card = f"warmup-{round_}-{i:03d}"
        start = samples.T0 + timedelta(days=2 * round_, minutes=7 * i)
        txns += samples.amount_spike(card, start, history=12)
        later = start + timedelta(hours=3)
        txns += samples.card_testing(card, later, count=6)
        txns += samples.double_swipe(card, later + timedelta(minutes=30))
        txns += samples.impossible_travel(card, later + timedelta(hours=1))
    return samples.by_time(txns)


def rehearsal_settings(settings, tag: str):
    """The settings of a rehearsal: its own transactions, alert, marker and dead-letter topics."""
    base = f"{settings.topic_transactions}.{query_names.rehearsal(tag)}"
    return settings.replace(topic_transactions=base, topic_alerts=f"{base}.alerts",
                            topic_alert_markers=f"{base}.markers", topic_dlq=f"{base}.dlq")


def warm_up(spark, plans: Sequence, detectors: Sequence, settings, options, seconds: float,
            tag: str | None = None, keep_topics: bool = False, drain_s: float = DRAIN_S,
            interrupted: Callable[[], str | None] = lambda: None) -> dict[str, int]:
    """Rehearse the queries of ``plans`` (``spark_job.options.QueryPlan``) for about ``seconds``; per
    rehearsal query that started, the transactions it read. The rehearsal's topics are named after ``tag``
    (random by default); ``keep_topics`` leaves them (tests read them); the queries get ``drain_s`` to read
    what was published. ``interrupted()``, asked a few times a second, ends it early when it returns why."""
    if seconds <= 0 or not plans:
        return {}
    from common.kafka_admin import create_topics
    from common.settings import checkpoint_location
    from common.topics import project_topics
    from spark_job.alert_writer import stats_path
    from spark_job.queries import start_planned_query

    tag = tag or uuid.uuid4().hex[:8]
    rehearsal = rehearsal_settings(settings, tag)
    own = {rehearsal.topic_transactions, rehearsal.topic_alerts, rehearsal.topic_alert_markers, rehearsal.topic_dlq}
    topics = [spec for spec in project_topics(rehearsal) if spec.name in own]
    try:
        create_topics(rehearsal, topics)
    except Exception as error:  # noqa: BLE001 - e.g. a broker user without the right to create topics
        log.warning("warm-up skipped: cannot create its topics (%s); a secure broker grants the job no "
                    "topic creation (deploy/acls.py)", str(error).splitlines()[0])
        return {}
    checkpoints = checkpoint_location(options.checkpoint_root or settings.checkpoint_root, f"{query_names.rehearsal(tag)}")
    started = time.monotonic()
    queries = []
    try:
        warm_options = dataclasses.replace(options, starting_offsets="earliest", checkpoint_root=checkpoints)
        for plan in plans:
            if interrupted():
                break
            try:
                queries.append(start_planned_query(spark, dataclasses.replace(plan, name=query_names.rehearsal(plan.name)),
                                                   detectors, rehearsal, warm_options))
            except Exception as error:  # noqa: BLE001 - its live query meets it again (the quarantine)
                log.warning("warm-up: query %s cannot start (%s); the job starts anyway", query_names.rehearsal(plan.name),
                            str(error).splitlines()[0])
        try:
            published = _publish(rehearsal, queries, seconds, interrupted)
        except Exception as error:  # noqa: BLE001 - the broker went away: the job's own queries will say so
            log.warning("warm-up cut short: cannot publish its transactions (%s)", str(error).splitlines()[0])
            published = 0
        read = _drain(queries, published, drain_s, interrupted)
        why = interrupted()
        log.info("warmed up%s: %d sample transactions through %s in %.1f s", f" (cut short: {why})" if why else "",
                 published, ", ".join(f"{q.name} ({read[q.name]} read, {_batches_text(q)})" for q in queries),
                 time.monotonic() - started)
        return read
    finally:
        for query in queries:
            _stop(query)
        if not keep_topics:
            _delete_topics(rehearsal, [t.name for t in topics])
        _delete(spark, checkpoints)
        for plan in plans:                        # the writers' stats (spark_job.alert_writer)
            stats_path(settings, query_names.rehearsal(plan.name)).unlink(missing_ok=True)


def _publish(settings, queries, seconds: float, interrupted: Callable[[], str | None]) -> int:
    """Sample transactions to the rehearsal's topic at ``PACE_PER_S`` until ``seconds`` are up and one round
    of them is out (every pattern, however slow the machine), every rehearsal query has failed, or it is
    interrupted; how many."""
    from common.kafka_io import json_bytes, make_producer

    producer = make_producer(settings)
    first = warmup_transactions(0)
    source = itertools.chain(first, (txn for n in itertools.count(1) for txn in warmup_transactions(n)))
    sent, one_round = 0, len(first)
    deadline = time.monotonic() + seconds
    try:
        while ((time.monotonic() < deadline or sent < one_round) and any(q.isActive for q in queries)
               and not interrupted()):
            tick = time.monotonic()
            for _ in range(PACE_PER_S // 10):
                txn = next(source)
                producer.send(settings.topic_transactions, key=txn["card_id"].encode(), value=json_bytes(txn))
                sent += 1
            producer.flush()
            time.sleep(max(0.0, 0.1 - (time.monotonic() - tick)))
    finally:
        producer.close()
    return sent


def _drain(queries, published: int, drain_s: float, interrupted: Callable[[], str | None]) -> dict[str, int]:
    """Wait (at most ``drain_s``) until every active rehearsal query has read all ``published``
    transactions; per query, how many it read."""
    from spark_job.progress import summarize_progress

    def read(query) -> int:
        progress = query.lastProgress          # PySpark's StreamingQueryProgress: its JSON as the listener has it
        return summarize_progress(json.loads(progress.json))["end_offset_total"] if progress else 0

    deadline = time.monotonic() + drain_s
    while (time.monotonic() < deadline and any(q.isActive and read(q) < published for q in queries)
           and not interrupted()):
        time.sleep(0.2)
    return {q.name: read(q) for q in queries}


def _batches_text(query) -> str:
    """How many batches a rehearsal query ran and how long its last ones took: whether the live batches
    start where the rehearsal left off (a JIT still compiling) or slower (something else)."""
    try:
        progress = [json.loads(update.json) for update in query.recentProgress]
    except Exception:  # noqa: BLE001 - a rehearsal never keeps the job from starting
        return "batches unknown"
    durations = [(p.get("durationMs") or {}).get("triggerExecution") for p in progress]
    durations = [d for d in durations if d is not None]
    if not durations:
        return "no batch"
    return f"{progress[-1].get('batchId', 0) + 1} batches, the last {', '.join(map(str, durations[-5:]))} ms"


def _stop(query) -> None:
    try:
        error = query.exception()
        if error is not None:
            log.warning("warm-up: query %s failed (%s); the job starts anyway", query.name,
                        str(error).splitlines()[0])
        query.stop()
    except Exception as error:  # noqa: BLE001 - a rehearsal never keeps the job from starting
        log.warning("warm-up: could not stop %s: %s", query.name, error)


def _delete_topics(settings, names: list[str]) -> None:
    """Remove the rehearsal's topics; a broker gone at that moment leaves them (named ``.warmup-``) for the
    job's own queries to report the broker."""
    from common.kafka_admin import delete_topics

    try:
        delete_topics(settings, names)
    except Exception as error:  # noqa: BLE001 - a rehearsal never keeps the job from starting
        log.warning("warm-up: could not delete its topics %s (%s)", ", ".join(names), str(error).splitlines()[0])


def _delete(spark, checkpoints: str) -> None:
    """Remove the rehearsal's checkpoints, on whatever file system they are (Hadoop's API, as Spark wrote them)."""
    from common.settings import local_folder

    try:
        path = spark._jvm.org.apache.hadoop.fs.Path(checkpoints)
        path.getFileSystem(spark._jsc.hadoopConfiguration()).delete(path, True)
    except Exception as error:  # noqa: BLE001 - e.g. a stop signal reached the JVM first
        folder = local_folder(checkpoints)
        if folder is None:
            log.warning("warm-up: could not delete %s: %s", checkpoints, error)
        else:
            shutil.rmtree(folder, ignore_errors=True)
