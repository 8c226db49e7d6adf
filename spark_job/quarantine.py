"""One failing detector must not stop the others that share its query.

When a query of several detectors fails, ``culprit`` looks for the detector whose code raised: the
error of a failed micro-batch carries the Python traceback of the function that raised, and each
detector's code lives in its own module. ``JobQueries.restart`` then restarts the query with that
detector's branch muted (it keeps its operators and state, so the checkpoint still fits, but reads no
rows) and starts the detector alone in a query of its own from where the shared query had got to:
if its failure is for good, that query alone keeps failing and is given up; the others run on.

Where the shared query had got to is the end of its last committed batch (``offsets_committed``: its
checkpoint, which holds it whether or not the failed run completed a batch), the next batch it would
have run. The detector's own query (``quarantined-<name>``) gets a fresh checkpoint each time it is set
apart (``forget_checkpoint``): one left by an earlier quarantine would resume where that one stopped,
days back. It lives as long as the job's run: the next start runs the detector in its group again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from detectors.base import Detector


def module_file(detector: Detector) -> str:
    """The detector's module as a path (``detectors/velocity.py``), as it appears in a traceback."""
    return str(Path(*detector.detect.__module__.split("."))) + ".py"


def culprit(error: str, detectors: Sequence[Detector]) -> Detector | None:
    """The detector whose module appears deepest in ``error``'s traceback; None when none appears (or
    when two detectors share a module: it cannot be told which)."""
    found = {d.name: (error.rfind(module_file(d)), d) for d in detectors}
    appearing = [(at, d) for at, d in found.values() if at >= 0]
    if not appearing or len({module_file(d) for _, d in appearing}) < len(appearing):
        return None
    return max(appearing, key=lambda pair: pair[0])[1]


def offsets_committed(checkpoint: str) -> str | None:
    """The end offsets of a local checkpoint's last committed batch, as ``startingOffsets`` JSON (its
    first Kafka source's: a query's sources all read the one topic); None when none is committed, or
    the checkpoint is not local."""
    from spark_job.alert_writer import batch_end_offsets, checkpoint_batches

    committed = (checkpoint_batches(checkpoint) or ([], []))[1]
    sources = [s for s in batch_end_offsets(checkpoint, committed[-1]) if s] if committed else []
    return json.dumps(sources[0]) if sources else None


def forget_checkpoint(spark, checkpoint: str) -> None:
    """Delete ``checkpoint`` (any file system Spark's Hadoop configuration reaches), if it exists."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(checkpoint)
    path.getFileSystem(spark._jsc.hadoopConfiguration()).delete(path, True)


def offsets_read(query) -> str | None:
    """The Kafka offsets a (failed) query had read up to in its last completed micro-batch, as the
    ``startingOffsets`` JSON of a query that is to go on from there; None before its first batch."""
    progress = query.lastProgress
    for source in (progress or {}).get("sources") or []:
        end = source.get("endOffset")
        if end:
            return end if isinstance(end, str) else json.dumps(end)
    return None
