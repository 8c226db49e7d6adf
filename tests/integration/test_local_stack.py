"""The embedded local stack is a real Kafka broker: partitioning, consumer groups, transactions, Spark."""

from __future__ import annotations

from kafka.partitioner.default import murmur2

from common.kafka_io import make_consumer, make_producer, read_topic


def test_keyed_message_lands_on_the_partition_its_key_hashes_to(stack, topics):
    topic = topics("keyed", partitions=12)
    producer = make_producer(stack)
    keys = [f"card-{i}" for i in range(200)]
    sent = {key: producer.send(topic, key=key, value=b"x").get(timeout=30).partition for key in keys}
    producer.close()

    # Kafka's default partitioner: murmur2(key) & 0x7fffffff modulo the partition count, the same in
    # the Java client (Spark, Kafka Streams) as in kafka-python.
    for key, partition in sent.items():
        assert partition == (murmur2(key.encode()) & 0x7FFFFFFF) % 12
    by_partition = {tp: [r.key.decode() for r in recs] for tp, recs in _group(read_topic(stack, topic)).items()}
    assert len(by_partition) > 6  # 200 keys spread over most of the 12 partitions
    for partition, partition_keys in by_partition.items():
        assert all(sent[k] == partition for k in partition_keys)


def test_consumer_group_resumes_from_its_committed_offset_after_restart(stack, topics, unique):
    topic = topics("group")
    producer = make_producer(stack)
    for i in range(10):
        producer.send(topic, key="k", value=str(i).encode())
    producer.flush()
    producer.close()

    group = f"test-group-{unique}"
    first = make_consumer(stack, group_id=group, max_poll_records=4)
    first.subscribe([topic])
    seen: list[bytes] = []
    while len(seen) < 4:
        for batch in first.poll(timeout_ms=500).values():
            seen.extend(r.value for r in batch)
    first.commit()
    first.close()
    assert seen == [b"0", b"1", b"2", b"3"]

    second = make_consumer(stack, group_id=group)
    second.subscribe([topic])
    rest: list[bytes] = []
    while len(rest) < 6:
        for batch in second.poll(timeout_ms=500).values():
            rest.extend(r.value for r in batch)
    second.close()
    assert rest == [str(i).encode() for i in range(4, 10)]


def test_committed_transaction_is_visible_to_read_committed_and_aborted_one_is_not(stack, topics, unique):
    topic = topics("txn", partitions=3)
    producer = make_producer(stack, transactional_id=f"test-txn-{unique}")
    producer.init_transactions()

    producer.begin_transaction()
    for i in range(5):
        producer.send(topic, key=f"k{i}", value=f"committed-{i}".encode())
    producer.commit_transaction()

    producer.begin_transaction()
    for i in range(5):
        producer.send(topic, key=f"k{i}", value=f"aborted-{i}".encode())
    producer.flush()
    producer.abort_transaction()
    producer.close()

    committed = sorted(r.value.decode() for r in read_topic(stack, topic, isolation_level="read_committed"))
    everything = sorted(r.value.decode() for r in read_topic(stack, topic, isolation_level="read_uncommitted"))
    assert committed == [f"committed-{i}" for i in range(5)]
    assert sorted(everything) == sorted(committed + [f"aborted-{i}" for i in range(5)])


def test_spark_reads_a_topic_through_the_kafka_connector(stack, topics, spark):
    from common.kafka_clients import spark_kafka_options

    topic = topics("spark", partitions=4)
    producer = make_producer(stack)
    for i in range(50):
        producer.send(topic, key=f"card-{i % 7}", value=f'{{"n": {i}}}'.encode())
    producer.flush()
    producer.close()

    rows = (spark.read.format("kafka").options(**spark_kafka_options(stack))
            .option("subscribe", topic).option("startingOffsets", "earliest").load()
            .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition")
            .collect())
    assert sorted(r.value for r in rows) == sorted(f'{{"n": {i}}}' for i in range(50))
    # The Java client Spark uses partitions by key exactly as kafka-python did.
    for row in rows:
        assert row.partition == (murmur2(row.key.encode()) & 0x7FFFFFFF) % 4


def _group(records):
    grouped: dict[int, list] = {}
    for record in records:
        grouped.setdefault(record.partition, []).append(record)
    return grouped
