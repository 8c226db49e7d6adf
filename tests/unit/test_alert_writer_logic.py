"""The exactly-once writer's decisions without a broker: skip a replay, refuse a checkpoint that went
backwards, and how many pieces a batch's output is pulled to the driver in."""

import pytest

from spark_job.alert_writer import (CheckpointWentBackError, Marker, fetch_partitions, parse_offsets_file,
                                    replay_action)

OFFSETS_5 = [{"transactions": {"0": 500, "1": 480}}]
OFFSETS_OTHER = [{"transactions": {"0": 900, "1": 870}}]
OFFSETS_FILE = ('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1764000,"conf":{"a":"b"}}\n'
                '{"transactions":{"0":500,"1":480}}')


def test_an_offsets_file_gives_the_batch_end_offsets_per_source():
    assert parse_offsets_file(OFFSETS_FILE) == OFFSETS_5
    assert parse_offsets_file(OFFSETS_FILE + "\n-\n") == [*OFFSETS_5, None]
    with pytest.raises(ValueError, match="not a Spark offsets file"):
        parse_offsets_file('{"transactions":{"0":1}}')


def test_batches_after_the_marker_or_of_another_query_are_written():
    assert replay_action(None, "q1", 0, OFFSETS_5) == "write"
    assert replay_action(Marker("q1", 5, OFFSETS_5), "q1", 6, OFFSETS_OTHER) == "write"
    assert replay_action(Marker("old-query", 9, OFFSETS_5), "q1", 0, OFFSETS_OTHER) == "write"


def test_the_replay_of_the_committed_batch_with_its_offsets_is_skipped():
    assert replay_action(Marker("q1", 5, OFFSETS_5), "q1", 5, OFFSETS_5) == "skip"


def test_a_marker_without_offsets_still_skips_its_batch():
    assert replay_action(Marker("q1", 5), "q1", 5, OFFSETS_OTHER) == "skip"


def test_a_batch_below_the_marker_means_the_checkpoint_went_backwards():
    with pytest.raises(CheckpointWentBackError) as raised:
        replay_action(Marker("q1", 10, OFFSETS_OTHER), "q1", 6, OFFSETS_5, "detector-x", "/ckpt/detector-x")
    message = str(raised.value)
    assert "\n" not in message
    assert "batch 6 is behind the last committed batch 10" in message
    assert "the checkpoint /ckpt/detector-x went backwards" in message
    assert """--starting-offsets '{"transactions": {"0": 900, "1": 870}}'""" in message
    with pytest.raises(CheckpointWentBackError):        # an old marker too: skipping would lose batch 6
        replay_action(Marker("q1", 10), "q1", 6, OFFSETS_5)


def test_the_same_batch_id_over_other_offsets_means_the_checkpoint_went_backwards():
    with pytest.raises(CheckpointWentBackError, match="batch 5 ends at offsets"):
        replay_action(Marker("q1", 5, OFFSETS_5), "q1", 5, OFFSETS_OTHER)


MB = 1024 * 1024


@pytest.mark.parametrize("rows, total, largest, expected", [
    (0, 0, 0, 1),                       # an empty batch
    (200_000, 40 * MB, 300, 1),         # a normal batch fits in one piece
    (2_000, 700 * MB, 350_000, 11),     # a flood of large records: ~64 MB pieces
    (10, 10 * 70 * MB, 70 * MB, 10),    # rows larger than a piece: one each
])
def test_a_batch_is_pulled_in_pieces_of_about_the_fetch_bytes(rows, total, largest, expected):
    pieces = fetch_partitions(rows, total, largest, 64 * MB)
    assert pieces == expected
    assert -(-rows // pieces) * largest <= 64 * MB or largest > 64 * MB


class _ExpiringProducer:
    """kafka-python's transactional producer as a broker's death leaves it: the records sent to one topic
    expire at the flush (their futures fail with a delivery timeout), and the transaction still commits."""

    def __init__(self, expiring_topic: str):
        from kafka.future import Future

        self.expiring_topic, self.future = expiring_topic, Future
        self.pending: list = []
        self.calls: list[str] = []

    def begin_transaction(self):
        self.calls.append("begin")

    def send(self, topic, key=None, value=None):
        future = self.future()
        self.pending.append((topic, future))
        return future

    def flush(self, timeout=None):
        from kafka.errors import KafkaTimeoutError

        for topic, future in self.pending:
            if topic == self.expiring_topic:
                future.failure(KafkaTimeoutError("Expiring 1 record(s): 120000 ms has passed since batch creation"))
            else:
                future.success(None)
        self.pending.clear()

    def commit_transaction(self):
        self.flush()
        self.calls.append("commit")

    def abort_transaction(self):
        self.calls.append("abort")


def test_a_batch_whose_records_expired_is_aborted_not_committed_without_them(tmp_path):
    from common.settings import Settings
    from spark_job.alert_writer import ExactlyOnceWriter, UndeliveredRecordsError

    settings = Settings.from_env({"topic_alerts": "alerts", "topic_alert_markers": "markers", "run_dir": tmp_path},
                                 environ={})
    writer = ExactlyOnceWriter(settings, "rules", tmp_path)
    writer._query_id = "q"
    writer.producer = _ExpiringProducer("alerts")
    rows = [("alert", "alerts", "card-1", '{"alert_id":"a1"}'), ("dead_letter", "dlq", "k", "{}")]
    with pytest.raises(UndeliveredRecordsError, match="1 record\\(s\\) of batch 3 were not delivered"):
        writer.write_batch(rows, batch_id=3)
    assert writer.producer.calls == ["begin", "abort"]
    assert writer.last is None and writer.stats["batches_written"] == 0

    writer.producer = _ExpiringProducer("elsewhere")          # delivered: committed
    assert writer.write_batch(rows, batch_id=3) == 2
    assert writer.producer.calls == ["begin", "commit"] and writer.last.batch_id == 3


def test_when_the_guard_fires_the_drivers_log_says_so_in_one_line(tmp_path, caplog):
    from common.settings import Settings
    from spark_job.alert_writer import ExactlyOnceWriter, UndeliveredRecordsError

    settings = Settings.from_env({"topic_alerts": "alerts", "topic_alert_markers": "markers", "run_dir": tmp_path},
                                 environ={})
    writer = ExactlyOnceWriter(settings, "rules", tmp_path)
    writer._query_id = "q"
    writer.producer = _ExpiringProducer("alerts")
    with caplog.at_level("ERROR", logger="spark_job.alert_writer"), pytest.raises(UndeliveredRecordsError):
        writer.write_batch([("alert", "alerts", "card-1", '{"alert_id":"a1"}')], batch_id=4)
    lines = [r.getMessage() for r in caplog.records if "were not delivered" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith(
        "UndeliveredRecordsError: writer rules: 1 record(s) of batch 4 were not delivered ("), lines
    assert "\n" not in lines[0] and "Expiring 1 record(s)" in lines[0]


def test_the_writers_request_timeout_fits_in_its_delivery_timeout():
    from common.settings import Settings
    from spark_job.alert_writer import delivery_config

    default = Settings.from_env({}, environ={})
    assert delivery_config(default, linger_ms=20) == {"linger_ms": 20, "delivery_timeout_ms": 120000,
                                                      "request_timeout_ms": 30000}    # kafka-python's defaults
    short = delivery_config(default.replace(writer_delivery_timeout_ms=3000), linger_ms=20)
    assert short["delivery_timeout_ms"] >= short["linger_ms"] + short["request_timeout_ms"]
    assert short["request_timeout_ms"] == 2980


def test_phase_medians_are_per_phase_over_the_batches_that_had_it():
    from spark_job.alert_writer import phase_medians

    recent = [{"run_ms": 10.2, "commit_ms": 4}, {"run_ms": 30, "commit_ms": 6}, {"run_ms": 20, "commit_ms": 5},
              {"commit_ms": 100}]    # a batch written without running (write_batch called directly)
    assert phase_medians(recent) == {"run_ms": 20, "commit_ms": 6}
    assert phase_medians([]) == {}


def test_a_batch_gets_the_transaction_time_its_size_needs_within_the_brokers_maximum():
    from spark_job.alert_writer import WRITE_FLOOR_BYTES_PER_S, transaction_timeout_for

    least, most = 60_000, 900_000
    assert transaction_timeout_for(0, 0, least, most) == least
    assert transaction_timeout_for(1_000, 3, least, most) == least + 2          # rounded up, never under
    # 40,000 dead letters of ~22 KB: 880 MB, 460 s at the floor rates; a batch's most (200,000): the maximum
    assert transaction_timeout_for(40_000 * 22_000, 40_000, least, most) == least + 440_000 + 20_000
    assert transaction_timeout_for(200_000 * 22_000, 200_000, least, most) == most
    assert transaction_timeout_for(60 * WRITE_FLOOR_BYTES_PER_S, 0, least, most) == 2 * least
    assert transaction_timeout_for(0, 0, 2_000, most) == 2_000
