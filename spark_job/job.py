"""The detector job: start the queries, publish their progress, supervise them until stopped."""

from __future__ import annotations

import argparse
import logging
import signal
import time
from typing import Sequence

from spark_job.options import DLQ_QUERY, from_arguments

log = logging.getLogger("spark_job")


def run(names: Sequence[str], args: argparse.Namespace) -> int:
    """Run the detectors ``names`` (all when empty) with the options of ``spark_job.options``."""
    from common.spark import get_spark
    from common.settings import get_settings
    from detectors import registry
    from spark_job.progress import ProgressListener, RedisProgress
    from spark_job.queries import (query_name, start_detector_query, start_detectors, start_dlq_query,
                                   start_shared_query)
    from spark_job.supervision import supervise

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    detectors = [registry.get(name) for name in names] if names else registry.all()
    options = from_arguments(args)
    spark = get_spark("fraud-detectors", settings)
    listener = ProgressListener(settings.run_dir / "progress", publish=RedisProgress(settings))
    spark.streams.addListener(listener.listener)

    by_query = {query_name(d): d for d in detectors}

    def restart(name: str):
        if options.shared:
            return start_shared_query(spark, detectors, settings, options)
        if name == DLQ_QUERY:
            return start_dlq_query(spark, settings, options)
        return start_detector_query(spark, by_query[name], settings, options)

    queries = start_detectors(spark, detectors, settings, options)
    log.info("running %s", ", ".join(q.name for q in queries))
    stop_at = time.monotonic() + args.duration if args.duration else None
    stopping = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stopping.update(now=True))
    try:
        failed = supervise(spark, queries, restart,
                           until=lambda: stopping["now"] or (stop_at is not None and time.monotonic() > stop_at))
    except KeyboardInterrupt:
        failed = 0
    finally:
        for query in spark.streams.active:
            query.stop()
        spark.stop()
    return 1 if failed else 0
