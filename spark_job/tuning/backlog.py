"""How many records a query's micro-batch read, or its first one will read, from its checkpoint.

``spark_job.tuning.codegen.CodegenByBatchSize`` runs large batches compiled. A batch's size is the
difference between its planned end offsets and the batch before's (``batch_rows``): a query that falls
behind does so batch by batch, so each batch decides for the next. Two batches are large before any has
run: the first of a query that starts behind (a restart after a broker outage, a job that was down), and
the batch a killed job had planned, which the job that takes over must run again first, exactly as
planned. Both are known from the checkpoint and the topic before the query starts (``first_batch_rows``).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from common.settings import Settings, local_folder
from spark_job.alert_writer import batch_end_offsets, checkpoint_batches

log = logging.getLogger(__name__)


def records_between(start: list | None, end: list | None) -> int | None:
    """Records from one batch's end offsets to another's (Spark's offsets: one dict per source, topic →
    partition → offset), of the source with the most; None when either is unknown. A detector query has
    a source per branch of its plan, each of the transactions topic, and reads them in one scan."""
    if not start or not end or len(start) != len(end):
        return None
    counts = [sum(max(0, offset - before.get(topic, {}).get(partition, 0))
                  for topic, partitions in after.items() for partition, offset in partitions.items())
              for before, after in zip(start, end) if before is not None and after is not None]
    return max(counts) if counts else None


def planned_again(checkpoint: str | Path) -> int | None:
    """Records of the batch a stopped or killed query had planned and not committed, which its next
    start runs again first; None when there is none, or the checkpoint is not local."""
    batches = checkpoint_batches(checkpoint)
    return None if batches is None else _planned_again(checkpoint, *batches)


def batch_rows(checkpoint: str | Path, batch_id: int) -> int | None:
    """Records batch ``batch_id`` of a local checkpoint read: its planned end offsets against the batch
    before's, or for a query's first batch against where its sources started (transaction markers count
    as records); None when the checkpoint is not local or no longer holds the batch before."""
    folder = local_folder(checkpoint)
    if folder is None:
        return None
    try:
        end = batch_end_offsets(checkpoint, batch_id)
        start = batch_end_offsets(checkpoint, batch_id - 1) if batch_id > 0 else _initial_offsets(folder, len(end))
        return records_between(start, end)
    except (OSError, ValueError) as error:     # the batch before aged out of the checkpoint
        log.debug("no size for batch %d of %s: %s", batch_id, checkpoint, error)
        return None


def _initial_offsets(folder: Path, sources: int) -> list:
    """Where each Kafka source of a query started: ``sources/<i>/0``, a version line and its JSON offsets
    (after a byte Spark 2.1 left there, kept for compatibility)."""
    starts = []
    for i in range(sources):
        path = folder / "sources" / str(i) / "0"
        lines = [line for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
        starts.append(json.loads(lines[-1]) if len(lines) >= 2 else None)
    return starts


def first_batch_rows(settings: Settings, checkpoint: str | Path) -> int | None:
    """What a query's first batch will read: the batch it must run again, or else what waits in the topic
    (its last stable offsets) behind its last committed batch; None for a query without one (it starts
    at the topic's end), or when the checkpoint or the broker cannot say (a guess for the codegen switch:
    never a reason not to start)."""
    try:
        batches = checkpoint_batches(checkpoint)
        if batches is None or not batches[1]:
            return None
        again = _planned_again(checkpoint, *batches)
        return again if again is not None else _behind(settings, batch_end_offsets(checkpoint, batches[1][-1]))
    except Exception as error:
        log.debug("no backlog at the start of %s: %s", checkpoint, error)
        return None


def _planned_again(checkpoint: str | Path, planned: list[int], committed: list[int]) -> int | None:
    if not planned or not committed or planned[-1] <= committed[-1]:
        return None
    return records_between(batch_end_offsets(checkpoint, committed[-1]), batch_end_offsets(checkpoint, planned[-1]))


def _behind(settings: Settings, end_offsets: list | None) -> int | None:
    from kafka import TopicPartition

    from common.kafka_io import make_consumer

    sources = [source for source in end_offsets or () if source is not None]
    if not sources:
        return None
    consumer = make_consumer(settings, group_id=None)
    try:
        ends: dict = {}
        for topic in sorted({topic for source in sources for topic in source}):
            partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
            for tp, offset in consumer.end_offsets(partitions).items():
                ends.setdefault(topic, {})[str(tp.partition)] = offset
    finally:
        consumer.close()
    return records_between(sources, [ends] * len(sources))
