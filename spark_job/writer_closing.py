"""Each exactly-once writer's Kafka producer is closed when its query ends: stopped, failed, or replaced
by a restart (``spark_job.live_params``, ``spark_job.supervision``).

Nothing else closes it: the writer lives in the driver as long as the query calls it, and Spark gives a
``foreachBatch`` function no end-of-query call. An open producer keeps its network thread, and one
whose topics are gone (a test's private topics, a deleted deployment) refreshes its metadata in a loop
that costs a few percent of a core each, for the life of the process.
"""

from __future__ import annotations

import logging
import threading

from common.progress_events import JsonProgressListener

log = logging.getLogger(__name__)

_lock = threading.Lock()
_writers: dict[str, object] = {}           # run id -> the writer of that run of a query
_listening: set[int] = set()               # id() of the JVM query managers that have our listener


def close_when_query_ends(spark, query, writer) -> None:
    """Close ``writer`` (anything with ``close()``) once ``query`` (this run of it) terminates."""
    manager = spark.streams
    key = id(spark)
    with _lock:
        if key not in _listening:
            manager.addListener(JsonProgressListener(None, on_run_terminated=_run_terminated))
            _listening.add(key)
        _writers[str(query.runId)] = writer
    if not query.isActive:                 # it ended before the listener could see it
        _run_terminated(str(query.runId))


def _run_terminated(run_id: str) -> None:
    with _lock:
        writer = _writers.pop(run_id, None)
    if writer is not None:
        # Off the listener bus: a close waits for the producer's requests, and the bus carries every
        # query's events.
        threading.Thread(target=_close, args=(writer,), name=f"close-writer-{run_id[:8]}", daemon=True).start()


def _close(writer) -> None:
    try:
        writer.close()
    except Exception as error:  # noqa: BLE001 - a producer that cannot close cleanly is closed all the same
        log.warning("closing the writer of an ended query: %s", error)
