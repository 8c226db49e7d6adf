"""The analyst's harness: run a detector on transaction dicts, statically or as a real streaming query.

``run_static(detector, txns)`` runs it on a static DataFrame. ``run_microbatches(detector, batches)`` runs
the very same detector as a Structured Streaming query, with the runner's watermark
(``withWatermark("event_time", detector.watermark)``), over micro-batches you give explicitly:

- every inner list becomes exactly one micro-batch (a JSON file of a file source read with
  ``maxFilesPerTrigger=1``; the next file is written only once the previous batch has run);
- after each data batch the harness lets the query go idle, which includes the data-free batch Spark runs
  when the watermark moved, so windows close, state is evicted, and the *next* batch's late rows are
  judged against the watermark of everything before it (Spark computes a batch's watermark from the
  batches before it: rows in the same batch as the newer rows are never late);
- ``watermark_tick(at)`` is a transaction that only advances event time (on a card no detector output is
  reported for): append it as a last batch to flush windows that are still open at the end.

Both return alert dicts in the alert contract (``event_time`` formatted like
``common.contracts.format_event_time``, no ``detected_at``: the sink adds that), sorted by
(event_time, alert_id). Transaction dicts are in the transaction contract (``event_time`` an ISO string).
Nothing sleeps: waits poll with a deadline.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from common.contracts import EVENT_TIME_PATTERN, format_event_time, parse_event_time
from common.waiting import wait_until
from detectors.base import TRANSACTION_SCHEMA, Detector

WATERMARK_CARD = "__watermark_tick__"
BATCH_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class BatchProgress:
    """One micro-batch Spark ran, as its StreamingQueryProgress tells it."""

    batch_id: int
    input_batch: int              # index of the given batch it belongs to (data-free batches: the one before)
    num_input_rows: int
    watermark: str | None         # the watermark this batch ran with (ISO), None before the first
    num_rows_dropped_by_watermark: int
    num_state_rows: int           # summed over the stateful operators
    has_data: bool = True         # False for the data-free batches Spark runs to advance the watermark
    raw: dict = field(repr=False, compare=False, default_factory=dict)


@dataclass
class HarnessResult:
    alerts: list[dict]                        # every alert, sorted by (event_time, alert_id)
    alerts_by_batch: list[list[dict]]         # alerts emitted while processing each given batch
    progress: list[BatchProgress]             # every micro-batch, data-free ones included

    def batch_progress(self, input_batch: int) -> list[BatchProgress]:
        return [p for p in self.progress if p.input_batch == input_batch]

    def dropped(self, input_batch: int | None = None) -> int:
        """Rows dropped behind the watermark (in one given batch, or in all)."""
        return sum(p.num_rows_dropped_by_watermark for p in self.progress
                   if input_batch is None or p.input_batch == input_batch)

    def state_rows(self) -> list[int]:
        """State rows after each given batch (after its data-free batch, if one ran)."""
        return [self.batch_progress(i)[-1].num_state_rows if self.batch_progress(i) else 0
                for i in range(len(self.alerts_by_batch))]

    def watermarks(self) -> list[str | None]:
        """The watermark after each given batch (the one the next batch is judged against)."""
        out = []
        for i in range(len(self.alerts_by_batch)):
            later = [p for p in self.progress if p.input_batch > i]
            out.append(later[0].watermark if later else (self.batch_progress(i)[-1].watermark
                                                          if self.batch_progress(i) else None))
        return out


def watermark_tick(at: datetime | str) -> dict:
    """A transaction whose only purpose is to advance event time to ``at`` (no alert is reported for it)."""
    text = at if isinstance(at, str) else format_event_time(at)
    return {"txn_id": f"tick-{text}", "card_id": WATERMARK_CARD, "customer_id": "tick", "merchant_id": "tick",
            "terminal_id": "tick", "amount": 0.0, "currency": "EUR", "event_time": text,
            "mcc": "0000", "channel": "pos", "lat": None, "lon": None}


def _spark(spark):
    if spark is not None:
        return spark
    from common.spark import get_spark
    return get_spark("detector-harness", with_kafka=False)


TIME_FIELDS = ("event_time", "ingested_at")     # text in the contract, timestamps in TRANSACTION_SCHEMA


def to_row(txn: dict) -> tuple:
    """A transaction dict as a tuple of ``TRANSACTION_SCHEMA`` (extra fields ignored)."""
    values = []
    for f in TRANSACTION_SCHEMA.fields:
        value = txn.get(f.name)
        if f.name in TIME_FIELDS:
            value = parse_event_time(value) if isinstance(value, str) else value
        elif f.name in ("amount", "lat", "lon") and value is not None:
            value = float(value)
        values.append(value)
    return tuple(values)


def transactions_frame(spark, txns: Iterable[dict]):
    return spark.createDataFrame([to_row(t) for t in txns], TRANSACTION_SCHEMA)


def alert_to_dict(row) -> dict[str, Any]:
    alert = row.asDict(recursive=True)
    moment = alert["event_time"]
    if moment.tzinfo is None:          # Spark hands back naive datetimes in the session time zone (UTC)
        moment = moment.replace(tzinfo=timezone.utc)
    alert["event_time"] = format_event_time(moment)
    if alert.get("ingested_at") is not None:
        alert["ingested_at"] = format_event_time(alert["ingested_at"].replace(tzinfo=timezone.utc))
    alert["txn_ids"] = list(alert["txn_ids"])
    alert["evidence"] = dict(alert["evidence"] or {})
    return alert


def _sorted(alerts: list[dict]) -> list[dict]:
    return sorted((a for a in alerts if a["card_id"] != WATERMARK_CARD),
                  key=lambda a: (a["event_time"], a["alert_id"]))


def run_static(detector: Detector, txns: list[dict], spark=None, params=None) -> list[dict]:
    """Alerts of ``detector`` on ``txns`` as a static DataFrame."""
    frame = transactions_frame(_spark(spark), txns)
    return _sorted([alert_to_dict(r) for r in detector.run(frame, params).collect()])


def _raw_schema():
    from pyspark.sql.types import StringType, StructField, StructType
    return StructType([StructField(f.name, StringType() if f.name in TIME_FIELDS else f.dataType, True)
                       for f in TRANSACTION_SCHEMA.fields])


def streaming_transactions(spark, source_dir: str):
    """The file source the harness feeds: one JSON file per micro-batch, parsed to TRANSACTION_SCHEMA."""
    from pyspark.sql import functions as F
    raw = spark.readStream.schema(_raw_schema()).option("maxFilesPerTrigger", 1).json(source_dir)
    return raw.withColumns({name: F.to_timestamp(F.col(name), EVENT_TIME_PATTERN) for name in TIME_FIELDS})


def _progress_entry(raw: dict, input_batch: int, has_data: bool) -> BatchProgress:
    operators = raw.get("stateOperators") or []
    watermark = (raw.get("eventTime") or {}).get("watermark")
    return BatchProgress(
        batch_id=raw["batchId"], input_batch=input_batch, num_input_rows=raw.get("numInputRows", 0),
        watermark=None if watermark in (None, "1970-01-01T00:00:00.000Z") else watermark,
        num_rows_dropped_by_watermark=sum(op.get("numRowsDroppedByWatermark", 0) or 0 for op in operators),
        num_state_rows=sum(op.get("numRowsTotal", 0) or 0 for op in operators), has_data=has_data, raw=raw)


def recent_progress(query) -> list[dict]:
    """The query's recent progress as dicts, from each progress's JSON: one py4j call per progress, where
    PySpark's ``recentProgress`` makes dozens (every field and map key), which a polling loop on a loaded
    machine pays every 50 ms."""
    return [json.loads(progress.json()) for progress in query._jsq.recentProgress()]


def _file_offset(raw: dict) -> int:
    """The file source's end offset in a progress (-1 before the first file: Spark reports "None")."""
    values = []
    for offset in (s.get("endOffset") for s in raw.get("sources") or []):
        if isinstance(offset, str):
            offset = json.loads(offset) if offset.strip().startswith("{") else None
        values.append((offset or {}).get("logOffset", -1))
    return max(values, default=-1)


def run_microbatches(detector: Detector, batches: list[list[dict]], spark=None,
                     checkpoint_dir: str | Path | None = None, params=None,
                     timeout: float = BATCH_TIMEOUT_S) -> HarnessResult:
    """Run ``detector`` as a streaming query over ``batches``, one micro-batch per inner list."""
    spark = _spark(spark)
    work = Path(tempfile.mkdtemp(prefix=f"harness-{detector.name}-"))
    source, staging = work / "source", work / "staging"
    source.mkdir()
    staging.mkdir()
    checkpoint = Path(checkpoint_dir) if checkpoint_dir else work / "checkpoint"

    collected: dict[int, list[dict]] = {}

    def collect(frame, batch_id: int) -> None:
        collected[batch_id] = [alert_to_dict(r) for r in frame.collect()]

    txns = streaming_transactions(spark, str(source)).withWatermark("event_time", detector.watermark)
    query = (detector.run(txns, params).writeStream
             .queryName(f"harness_{detector.name}_{uuid.uuid4().hex[:8]}")
             .option("checkpointLocation", str(checkpoint))
             .outputMode("append")
             .foreachBatch(collect)
             .start())
    progress: list[BatchProgress] = []
    seen, last_offset = -1, -1
    try:
        for index, batch in enumerate(batches):
            name = f"batch-{index:05d}.json"
            (staging / name).write_text("".join(json.dumps(t) + "\n" for t in batch))
            (staging / name).rename(source / name)         # atomic: the source never sees half a file

            def data_batch_done() -> bool:
                raise_if_failed(query)
                return any(_file_offset(p) >= index for p in recent_progress(query))

            wait_until(data_batch_done, timeout, f"micro-batch {index} of {detector.name}", interval=0.05)
            # The data batch has run; now let the query go idle: that includes the data-free batch Spark
            # runs when the watermark moved (evictions, closed windows). processAllAvailable returns once a
            # trigger finds nothing to do.
            query.processAllAvailable()
            raise_if_failed(query)
            for raw in recent_progress(query):
                if raw["batchId"] > seen:
                    # A batch read data iff the file source's end offset moved (a progress's startOffset
                    # is not always reported reliably, so compare with the previous batch instead).
                    offset = _file_offset(raw)
                    progress.append(_progress_entry(raw, index, has_data=offset > last_offset))
                    seen, last_offset = raw["batchId"], max(last_offset, offset)
    finally:
        query.stop()
        shutil.rmtree(work, ignore_errors=True)

    by_batch: list[list[dict]] = [[] for _ in batches]
    owner = {p.batch_id: p.input_batch for p in progress}
    for batch_id, found in collected.items():
        by_batch[owner.get(batch_id, len(batches) - 1)].extend(found)
    return HarnessResult(alerts=_sorted([a for found in by_batch for a in found]),
                         alerts_by_batch=[_sorted(found) for found in by_batch], progress=progress)


def raise_if_failed(query) -> None:
    """Raise the error of a streaming query that stopped with one (for polls with a deadline)."""
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"streaming query {query.name} failed: {error}")
