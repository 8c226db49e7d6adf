"""The run whose classes ``deploy fetch`` records for the Spark driver (``deploy/class_archive.py``).

A session as the job builds it, and each rule detector on a few transactions statically and as a
streaming query (``detectors.harness``): Catalyst's planning, the stream's state stores and checkpoints,
the Python runners. ``python -m spark_job.class_recording OUT`` prints ``jvm-pid=<pid>``; that JVM writes
the archive ``OUT`` as it exits.
"""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from common.contracts import format_event_time
from common.settings import get_settings
from common.spark import get_spark, session_config
from detectors import registry, samples
from detectors.harness import run_microbatches, run_static


def record(out: Path) -> int:
    """Run the workload; the pid of the JVM that will write the archive ``out`` when it exits."""
    settings = get_settings()
    options = session_config(settings, "fraud-class-archive")["spark.driver.extraJavaOptions"]
    spark = get_spark("fraud-class-archive", settings,
                      extra={"spark.driver.extraJavaOptions": f"{options} -XX:ArchiveClassesAtExit={out}"})
    txns = samples.representative()
    middle = format_event_time(samples.T0 + timedelta(minutes=45))
    batches = [[t for t in txns if t["event_time"] < middle], [t for t in txns if t["event_time"] >= middle]]
    # Those that need nothing besides the stream (ml_score needs a trained model; its Python runner is
    # amount_anomaly's), so the recording is the same on every machine.
    for detector in [d for d in registry.all() if registry.preflight(d) is None]:
        run_static(detector, txns, spark)
        run_microbatches(detector, batches, spark)
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    spark.stop()
    return int(pid)


if __name__ == "__main__":
    print(f"jvm-pid={record(Path(sys.argv[1]))}", flush=True)
