"""Each query's progress: a log line per micro-batch, a JSON file per query, totals in Redis."""

from __future__ import annotations

import json
import logging
from collections import deque
from pathlib import Path
from typing import Callable

from common.quantiles import quantile
from common.settings import Settings
from spark_job.query_names import is_rehearsal

log = logging.getLogger("spark_job.progress")


def summarize_progress(progress: dict) -> dict:
    """The figures worth watching from one ``StreamingQueryProgress`` (as JSON dict)."""
    state = progress.get("stateOperators") or []
    observed = progress.get("observedMetrics") or {}
    validation = next(iter(observed.values()), {}) if observed else {}
    return {
        "name": progress.get("name"),
        "batch_id": progress.get("batchId"),
        "input_rows": progress.get("numInputRows", 0),
        "input_rows_per_second": round(progress.get("inputRowsPerSecond") or 0.0, 1),
        "processed_rows_per_second": round(progress.get("processedRowsPerSecond") or 0.0, 1),
        "batch_duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "state_rows": sum(op.get("numRowsTotal", 0) for op in state),
        "rows_dropped_by_watermark": sum(op.get("numRowsDroppedByWatermark", 0) for op in state),
        "invalid_records": validation.get("invalid", 0),
        "end_offset_total": _end_offset_total(progress),
        "offsets_behind_latest": _offsets_behind_latest(progress),
        # Where the batch's time went: Spark's phases, and each stateful operator's updates, removals
        # (evictions by the watermark) and state commit.
        "duration_ms": progress.get("durationMs") or {},
        "state_operators_ms": [{key: op.get(key) for key in ("operatorName", "allUpdatesTimeMs",
                                                             "allRemovalsTimeMs", "commitTimeMs")}
                               for op in state],
    }


def phases_text(summary: dict) -> str:
    """Where one batch's time went, for its log line: Spark's phases (longest first) and the stateful
    operators' updates and state commits, e.g. ``addBatch 640, walCommit 41, ..., state updates 12 commit 9``."""
    phases = {k: v for k, v in (summary.get("duration_ms") or {}).items() if k != "triggerExecution" and v}
    text = ", ".join(f"{k} {v}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1]))
    operators = summary.get("state_operators_ms") or []
    if operators:
        updates = sum(op.get("allUpdatesTimeMs") or 0 for op in operators)
        commits = sum(op.get("commitTimeMs") or 0 for op in operators)
        text += f"{', ' if text else ''}state updates {updates} commit {commits}"
    return text


def _offsets_behind_latest(progress: dict) -> int | None:
    """Records in the topic the query had not read when it planned this batch (its consumer lag): the
    Kafka source's ``avgOffsetsBehindLatest`` times the partitions it reads."""
    total = None
    for source in progress.get("sources") or []:
        average = (source.get("metrics") or {}).get("avgOffsetsBehindLatest")
        end = source.get("endOffset")
        offsets = json.loads(end) if isinstance(end, str) else (end or {})
        partitions = sum(len(p) for p in offsets.values()) if isinstance(offsets, dict) else 0
        if average is not None:
            total = (total or 0) + round(float(average) * partitions)
    return total


def _end_offset_total(progress: dict) -> int:
    """Sum over partitions of the Kafka offsets this batch read up to (how far the query has got)."""
    total = 0
    for source in progress.get("sources") or []:
        end = source.get("endOffset")
        offsets = json.loads(end) if isinstance(end, str) else (end or {})
        for partitions in offsets.values() if isinstance(offsets, dict) else []:
            total += sum(int(v) for v in partitions.values())
    return total


RECENT_BATCHES = 200      # batches with input whose phases each query's file summarises


def where_the_time_goes(batches) -> dict:
    """p50 and p99 of each phase of Spark's ``durationMs`` and of each stateful operator's updates,
    removals and commit, over ``batches`` (summaries of batches that read input)."""
    phases: dict[str, list[float]] = {}
    for batch in batches:
        for phase, ms in (batch.get("duration_ms") or {}).items():
            phases.setdefault(phase, []).append(ms)
        for i, op in enumerate(batch.get("state_operators_ms") or []):
            for key in ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs"):
                if op.get(key) is not None:
                    phases.setdefault(f"state{i}:{op.get('operatorName')}:{key}", []).append(op[key])
    return {"batches": len(batches), "ms": {phase: {"p50": quantile(values, 0.5), "p99": quantile(values, 0.99)}
                                            for phase, values in phases.items()}}


class ProgressListener:
    """Logs a compact line per micro-batch and keeps the latest progress of each query in a JSON file
    under ``<run_dir>/progress/`` (read by the demo's live view and the dashboard)."""

    def __init__(self, progress_dir: Path, publish: Callable[[str, dict], None] | None = None, metrics=None):
        from common.progress_events import JsonProgressListener

        self.progress_dir = progress_dir
        self.publish = publish
        self.metrics = metrics             # spark_job.metrics.SparkMetrics, or None when metrics are off
        progress_dir.mkdir(parents=True, exist_ok=True)
        self.listener = JsonProgressListener(
            self.record,
            on_started=lambda name, query_id: log.info("query %s started (id %s)", name, query_id),
            on_terminated=self._terminated)
        self.totals: dict[str, dict] = {}
        self.recent: dict[str, deque] = {}

    @staticmethod
    def _terminated(query_id: str, error: str | None) -> None:
        if error:
            log.error("query %s failed: %s", query_id, error.splitlines()[0])

    def record(self, progress: dict) -> None:
        if is_rehearsal(progress.get("name") or ""):
            return                 # the warm-up's queries (spark_job.tuning.rehearsal): not the job's
        summary = summarize_progress(progress)
        if self.metrics is not None:
            try:
                self.metrics.record(progress, summary)
            except Exception as error:  # noqa: BLE001 - metrics must never cost the progress file
                log.warning("metrics: cannot record the progress of %s: %s", summary.get("name"), error)
        name = summary["name"] or "unnamed"
        totals = self.totals.setdefault(name, {"input_rows": 0, "rows_dropped_by_watermark": 0,
                                               "invalid_records": 0})
        for key in totals:
            totals[key] += summary[key] or 0
        summary["totals"] = dict(totals)
        recent = self.recent.setdefault(name, deque(maxlen=RECENT_BATCHES))
        if summary["input_rows"]:
            recent.append(summary)
        summary["recent_batches"] = where_the_time_goes(recent)
        if summary["input_rows"]:
            log.info("%(name)s batch %(batch_id)s: %(input_rows)s rows, %(processed_rows_per_second)s rows/s, "
                     "%(batch_duration_ms)s ms (%(phases)s), watermark %(watermark)s, state %(state_rows)s rows, "
                     "late-dropped %(rows_dropped_by_watermark)s, invalid %(invalid_records)s",
                     {**summary, "phases": phases_text(summary)})
        path = self.progress_dir / f"{name}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary))
        tmp.replace(path)
        if self.publish is not None:
            self.publish(name, summary)


class RedisProgress:
    """Publishes each query's progress totals to Redis (``RedisKeys.queries``), where the dashboard
    shows them: rows read, rows dropped by the watermark (late events), invalid records. Observability
    only: an unreachable Redis is logged once per outage and never fails the job."""

    def __init__(self, settings: Settings):
        from common.redis_clients import redis_client
        from common.redis_keys import RedisKeys

        self.client = redis_client(settings, socket_timeout=2, socket_connect_timeout=2)
        self.key = RedisKeys(settings.sinks_namespace).queries
        self.failing = False

    def __call__(self, name: str, summary: dict) -> None:
        value = {**summary["totals"], "watermark": summary["watermark"], "batch_id": summary["batch_id"],
                 "state_rows": summary["state_rows"], "offsets_behind_latest": summary["offsets_behind_latest"]}
        try:
            self.client.hset(self.key, name, json.dumps(value))
            self.failing = False
        except Exception as error:  # noqa: BLE001 - progress must never stop detection
            if not self.failing:
                log.warning("cannot publish progress to Redis: %s", error)
            self.failing = True

