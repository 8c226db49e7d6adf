"""Baseline (a): a plain kafka-python consumer doing double_swipe + velocity in Python dictionaries.

    python -m bench.baselines.kafka_consumer --topic T --alerts-topic A --dlq-topic D --group G --stats F

One process per instance; start two with the same ``--group`` for "one per core" (Kafka's group
protocol splits the partitions). At-least-once like Spark's built-in sink: after each ``poll()`` the
alerts and dead letters are sent (acks=all, idempotent producer); at most every ``--commit-interval``
seconds the producer is flushed and only then are the consumed offsets committed. Runs until SIGTERM.

Fetches are capped at 64 KiB per partition, so one ``poll()`` holds records of every partition and
event time advances evenly across them, as in a Spark micro-batch (whose ``maxOffsetsPerTrigger`` is
split across partitions); with large per-partition fetches a pre-loaded topic is read partition by
partition and the watermark would jump past the other partitions' records.
"""

from __future__ import annotations

import argparse
import logging
import signal
import time

from kafka.errors import CommitFailedError, RebalanceInProgressError

from bench.baselines.logic import Detection
from bench.baselines.stats import StatsFile
from common.kafka_io import make_consumer
from common.settings import get_settings
from common.waiting import wait_until
from producers.publish import make_tuned_producer

log = logging.getLogger("bench.kafka_consumer")


def commit(consumer) -> bool:
    """Commit the consumed offsets; False when a rebalance got in the way (the group's other process
    joined or left). The partitions then move on uncommitted: their records since the last commit are
    read again by their new owner (at-least-once), and the next poll completes the rebalance."""
    try:
        consumer.commit()
        return True
    except (CommitFailedError, RebalanceInProgressError) as error:
        log.warning("offset commit skipped: %s", error)
        return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--alerts-topic", required=True)
    parser.add_argument("--dlq-topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--stats", required=True)
    parser.add_argument("--max-poll-records", type=int, default=5000)
    parser.add_argument("--commit-interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    for noisy in ("kafka.conn", "kafka.net", "kafka.protocol", "kafka.consumer.fetcher", "kafka.cluster"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    settings = get_settings()
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    consumer = make_consumer(settings, group_id=args.group, max_poll_records=args.max_poll_records,
                             fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=64 * 1024)
    # The topic's partitions must be in the consumer's metadata before it joins: otherwise its first
    # assignment is empty ("No partition metadata for topic"), and kafka-python 3.0.12 hung for good in
    # the rejoin that followed (seen in make bench: 0 records in 120 s).
    wait_until(lambda: consumer.partitions_for_topic(args.topic), 30, f"metadata of {args.topic}", interval=0.2)
    consumer.subscribe([args.topic])
    producer = make_tuned_producer(settings, linger_ms=5)
    detection, stats = Detection(), StatsFile(args.stats)
    topics = {"alert": args.alerts_topic, "dlq": args.dlq_topic}
    out: list = []
    next_commit = time.monotonic() + args.commit_interval
    dirty = False
    try:
        while not stop["now"]:
            polled = consumer.poll(timeout_ms=100)
            began = time.time()
            n = 0
            for tp, records in polled.items():
                process = detection.process
                for r in records:
                    process(r.value, r.key, tp.topic, tp.partition, r.offset, r.timestamp, out)
                n += len(records)
            if n:
                detection.keep_partitions({tp.partition for tp in consumer.assignment()})
                detection.end_batch(out)
                dirty = True
            for kind, key, value in out:
                producer.send(topics[kind], key=key if isinstance(key, bytes) else key.encode(),
                              value=value.encode())
            out.clear()
            stats.touch_records(n, began)
            if dirty and time.monotonic() >= next_commit:
                producer.flush()            # alerts acknowledged before their input is committed
                dirty = not commit(consumer)
                next_commit = time.monotonic() + args.commit_interval
            stats.assigned = stats.assigned or bool(consumer.assignment())
            stats.maybe_write(detection.counts, len(detection.fifo))
    finally:
        producer.flush()
        if dirty:
            commit(consumer)
        stats.maybe_write(detection.counts, len(detection.fifo), force=True)
        consumer.close()
        producer.close(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
