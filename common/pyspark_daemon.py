"""PySpark's Python worker daemon, started with one fix for Python 3.11: a lazy zip-importer cache reset.

Spark starts its Python workers with ``python -m <spark.python.daemon.module>``; ``common.spark`` points
that setting here (``Settings.spark_python_daemon``, on every master). Every Python task begins with ``importlib.invalidate_caches()``
(``pyspark.worker_util.setup_spark_files``), and on Python 3.11 that makes every zip importer on
``sys.path`` read its archive's whole directory again, at once. A pip-installed PySpark 4.0 puts three
archives on the workers' path: ``pyspark.zip`` (1,220 entries), py4j's and ``spark-core``'s jar (5,261
entries): ~17 ms of directory reading per task when idle, more when both cores are busy, and a third of
the Python workers' samples in a profile of ``amount_anomaly`` (py-spy; figures in docs/performance.md,
Performance section). Python 3.12 made the reset lazy (CPython gh-103200); here an archive's directory is
read again only when its size or modification time changed, which keeps the reset's meaning.

It also imports what the detectors' pandas functions need (pandas, pyarrow, scikit-learn, the project's
scoring modules) once, before it forks: a worker forked mid-traffic (another task running at the same
time) otherwise imports them at its first task, seconds on two busy cores, and that batch's alerts wait.
"""

from __future__ import annotations

import importlib
import os
import sys
import zipimport

_read_as_of: dict[str, tuple[int, int]] = {}


def _signature(path: str) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


# What the Python side of the detectors imports; workers forked from the daemon share it copy-on-write.
PRELOADED = (
    "numpy", "pandas", "pyarrow", "pyspark.sql.pandas.serializers", "pyspark.sql.pandas.types",
    "sklearn.ensemble", "sklearn.linear_model", "sklearn.pipeline", "sklearn.preprocessing", "threadpoolctl",
    "models.estimators", "models.features", "models.scoring", "detectors.amount_scoring",
)


def preload(modules=PRELOADED) -> list[str]:
    """Import ``modules`` in this process; the ones that fail are left to the workers (which report
    their error at the task that needs them). Returns the names that failed."""
    failed = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:    # noqa: BLE001 - a worker imports it again and fails where it is used
            failed.append(name)
            print(f"pyspark_daemon: {name} not preloaded: {type(exc).__name__}: {exc}", file=sys.stderr)
    return failed


def install() -> None:
    """Make ``zipimporter.invalidate_caches`` re-read an archive only when the archive changed."""
    cls = zipimport.zipimporter
    if getattr(cls, "_fraud_lazy_reset", False):
        return
    original = cls.invalidate_caches

    def invalidate_caches(self):
        signature = _signature(self.archive)
        if signature is not None and _read_as_of.get(self.archive) == signature:
            return
        original(self)
        _read_as_of[self.archive] = signature

    cls.invalidate_caches = invalidate_caches
    cls._fraud_lazy_reset = True


if __name__ == "__main__":
    install()
    preload()
    from pyspark import daemon

    daemon.manager()
