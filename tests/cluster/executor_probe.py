"""A Spark application that reports, from the executors' Python workers, where their code comes from.

``tests/cluster/test_executor_env.py`` submits it with the detector job's ``spark-submit`` command
(``deploy.cluster.submit_command``, the application file swapped for this one). It prints one line,
``EXECUTORS <json>``: a report per task."""

from __future__ import annotations

import json

DRIVER_ONLY = ("sinks", "deploy")    # on the driver (the repo), never shipped in the code zip


def where(index: int) -> dict:
    import importlib.util
    import os
    import sys
    import zipimport

    import common
    import detectors
    import pyspark

    return {"task": index, "cwd": os.getcwd(), "python": sys.executable, "prefix": sys.prefix,
            # Absolute: a relative entry of sys.path gives a module a relative __file__.
            "common": os.path.abspath(common.__file__), "detectors": os.path.abspath(detectors.__file__),
            "pyspark": os.path.abspath(pyspark.__file__),
            "driver_only_importable": [m for m in DRIVER_ONLY if importlib.util.find_spec(m) is not None],
            # Set by common/pyspark_daemon.py: the Python workers were forked from the project's daemon.
            "daemon_module_ran": bool(getattr(zipimport.zipimporter, "_fraud_lazy_reset", False))}


def main() -> None:
    from common.spark import get_spark

    spark = get_spark("executor-probe", with_kafka=False)
    reports = spark.sparkContext.parallelize(range(4), 4).map(where).collect()
    print("EXECUTORS " + json.dumps(reports), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
