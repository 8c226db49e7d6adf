"""Interpreted code and one task for small micro-batches, compiled code and every partition for large ones, per query."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from pyspark.sql import DataFrame

from common.settings import Settings
from spark_job.tuning.backlog import batch_rows, first_batch_rows

log = logging.getLogger("spark_job.tuning.codegen")

FALLBACK = "FALLBACK"


class CodegenByBatchSize:
    """A ``foreachBatch`` function that runs ``write`` and picks how the query's next batches run code.

    Small micro-batches (a query that keeps up) run best interpreted (``Settings.spark_codegen_factory_mode``,
    NO_CODEGEN): their cost is per batch, and compiled code would be generated again every batch for the
    eviction predicates that embed the watermark. Large ones (a query catching up) run best compiled:
    their cost is per row, and NO_CODEGEN also turns whole-stage code generation off. So when the batch
    just written read ``spark_codegen_large_batch_rows`` records or more, the stream's own session (the
    one Spark plans and runs this query's batches with) is set to FALLBACK, Spark's default, for the next
    batch, and back once a batch is small again. A small batch is also written as one task
    (``coalesce(1)``): the union of a query's branches would otherwise be a task per branch, each
    deserializing the whole stage's plan.

    A query starts in the mode of its first batch (``starting``): a restart behind the topic, or the batch
    a killed job had planned, run again first, is large before any batch has run (``spark_job.tuning.backlog``).
    Measured in docs/performance.md.
    """

    def __init__(self, write: Callable, settings: Settings, name: str, checkpoint: str):
        self.write = write
        self.settings = settings
        self.name, self.checkpoint = name, checkpoint
        self.large_rows = settings.spark_codegen_large_batch_rows
        self.small_mode = settings.spark_codegen_factory_mode
        self.mode = self.small_mode

    @contextmanager
    def starting(self, spark) -> Iterator[None]:
        """Around ``start()`` of the query: its own session is cloned from ``spark`` then, so it starts in
        the mode of its first batch's size; ``spark`` gets its setting back afterwards."""
        first = first_batch_rows(self.settings, self.checkpoint) if self.large_rows else None
        self.mode = self.mode_for(first) if first is not None else self.small_mode
        before = spark.conf.get("spark.sql.codegen.factoryMode")
        switch = first is not None and self.mode != self.small_mode and self.mode != before
        if switch:
            log.info("first batch of %s records: the query starts with spark.sql.codegen.factoryMode=%s",
                     f"{first:,}", self.mode)
            spark.conf.set("spark.sql.codegen.factoryMode", self.mode)
        try:
            yield
        finally:
            if switch:
                spark.conf.set("spark.sql.codegen.factoryMode", before)

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        # on two busy cores a second task of a small batch runs nothing sooner (see the docstring)
        small = self.large_rows and self.mode != FALLBACK
        self.write(batch_df.coalesce(1) if small else batch_df, batch_id)
        if not self.large_rows:    # the switch is off: no py4j round trips for the batch's count
            return
        wanted = self.mode_for(self.input_rows(batch_id))
        if wanted != self.mode:
            batch_df.sparkSession.conf.set("spark.sql.codegen.factoryMode", wanted)
            log.info("query %s: next batches with spark.sql.codegen.factoryMode=%s", self.name, wanted)
            self.mode = wanted

    def mode_for(self, input_rows: int | None) -> str:
        if input_rows is None:
            return self.mode
        return FALLBACK if input_rows >= self.large_rows else self.small_mode

    def input_rows(self, batch_id: int) -> int | None:
        """Records the batch just written read: its offsets in the checkpoint against the batch before's."""
        return batch_rows(self.checkpoint, batch_id)
