"""Baseline (b): a Faust agent doing double_swipe + velocity (``bench.baselines.logic``), alerts to Kafka.

    FRAUD_TOPIC_TRANSACTIONS=T FRAUD_TOPIC_ALERTS=A FRAUD_TOPIC_DLQ=D BENCH_FAUST_APP_ID=G \\
    BENCH_STATS=F python -m bench.baselines.faust_agent worker -l warning

The app is the project's own ``sinks.faust_support.make_app`` (read_committed consumer, acks=all,
at-least-once: Faust commits an offset after the events before it were acknowledged and its producer
flushed). One agent over all partitions takes events in batches (up to 2,000 or 50 ms), runs the
same ``Detection`` as the kafka-python baseline, advances the watermark once per batch and sends
every alert / dead letter with the app's producer, keyed by card.
"""

from __future__ import annotations

import os
import time

from bench.baselines.logic import Detection
from bench.baselines.stats import StatsFile
from common.settings import get_settings
from sinks.faust_support import main as run_cli, make_app

settings = get_settings()
app = make_app(os.environ.get("BENCH_FAUST_APP_ID", "bench-faust"), settings,
               stream_buffer_maxsize=16384, broker_max_poll_records=5000,
               consumer_max_fetch_size=64 * 1024)
transactions = app.topic(settings.topic_transactions, key_type=bytes, value_type=bytes,
                         key_serializer="raw", value_serializer="raw")
outputs = {"alert": app.topic(settings.topic_alerts, key_serializer="raw", value_serializer="raw"),
           "dlq": app.topic(settings.topic_dlq, key_serializer="raw", value_serializer="raw")}
detection = Detection()
stats = StatsFile(os.environ.get("BENCH_STATS", "faust-stats.json"))


@app.agent(transactions)
async def detect(stream):
    out: list = []
    async for events in stream.take_events(2000, within=0.05):
        began = time.time()
        process = detection.process
        for event in events:
            msg = event.message
            process(msg.value, msg.key, msg.topic, msg.partition, msg.offset, int((msg.timestamp or 0) * 1000), out)
        detection.end_batch(out)
        for kind, key, value in out:
            await outputs[kind].send(key=key if isinstance(key, bytes) else key.encode(), value=value.encode())
        out.clear()
        stats.touch_records(len(events), began)
        stats.maybe_write(detection.counts, len(detection.fifo))


@app.timer(interval=0.5)
async def write_stats():
    stats.assigned = bool(app.consumer.assignment())
    stats.maybe_write(detection.counts, len(detection.fifo), force=True)


if __name__ == "__main__":
    run_cli(app, settings)
