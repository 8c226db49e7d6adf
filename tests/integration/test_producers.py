"""The producers against a real broker and Redis: exactly once, on the card's partition, in per-card
order, through a broker restart; replay; the reference loader."""

from __future__ import annotations

import json
import threading
from collections import defaultdict

from kafka.partitioner.default import murmur2

from common.contracts import card_key, customer_key, merchant_key
from common.kafka_io import read_topic
from common.waiting import wait_until
from producers.__main__ import main
from producers.publish import Stats
from producers.reference import load_reference
from producers.simulate import publish
from producers.simulator import SimConfig, Simulator
from producers.world import build_world


def expected_stream(config: SimConfig, count: int) -> list[tuple[str, str]]:
    """(card_id, txn_id) in emission order."""
    return [(json.loads(v)["card_id"], json.loads(v)["txn_id"])
            for b in Simulator(config).take(count) for v in b.values]


def assert_exactly_once_in_card_order(records, expected, partitions: int) -> None:
    txn_ids = [json.loads(r.value)["txn_id"] for r in records]
    assert len(txn_ids) == len(set(txn_ids)) == len(expected), "lost or duplicated records"
    assert set(txn_ids) == {tid for _, tid in expected}
    seen = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        txn = json.loads(record.value)
        assert record.key.decode() == txn["card_id"]
        assert record.partition == (murmur2(record.key) & 0x7FFFFFFF) % partitions
        seen[txn["card_id"]].append(txn["txn_id"])
    wanted = defaultdict(list)
    for card, tid in expected:
        wanted[card].append(tid)
    assert seen == wanted, "per-card order differs from the emission order"


def test_published_transactions_arrive_once_each_on_their_cards_partition_in_order(stack, topics):
    topic, labels = topics("transactions", partitions=12), topics("labels", partitions=12)
    config = SimConfig(seed=21, customers=2000)
    stats = publish(Simulator(config), stack, topic, count=8000, labels_topic=labels)
    assert (stats.sent, stats.failed, stats.unconfirmed, stats.label_failed) == (8000, 0, 0, 0)
    assert_exactly_once_in_card_order(read_topic(stack, topic, min_records=8000),
                                      expected_stream(config, 8000), 12)
    published = {json.loads(r.value)["txn_id"]: json.loads(r.value) for r in read_topic(stack, labels)}
    truth = [json.loads(line) for b in Simulator(config).take(8000) for _, line in b.label_lines()]
    sparse = [t for t in truth if t["is_fraud"] or t["scenario"] != "none" or t["late"]]
    assert sorted(published) == sorted(t["txn_id"] for t in sparse) and sparse


def test_a_broker_restart_while_publishing_loses_nothing_and_duplicates_nothing(private_broker):
    s = private_broker.settings
    config = SimConfig(seed=22, customers=2000)
    count = 12_000
    stats = Stats()
    done = threading.Event()

    def run():
        try:
            publish(Simulator(config), s, s.topic_transactions, count=count, rate=2000, stats=stats,
                    labels_topic=None)
        finally:
            done.set()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    wait_until(lambda: stats.attempted >= 3000, 60, "a quarter of the records sent")
    private_broker.broker.stop()
    assert not done.is_set(), "the restart must happen in the middle of publishing"
    private_broker.broker.up()
    wait_until(done.is_set, 180, "the publisher to finish")
    worker.join(timeout=5)
    assert stats.attempted == count and stats.failed == 0 and stats.unconfirmed == 0, stats.summary()
    assert_exactly_once_in_card_order(read_topic(s, s.topic_transactions, min_records=count),
                                      expected_stream(config, count), s.partitions_transactions)


def test_a_delivery_that_expires_while_the_broker_is_paused_is_reported_and_the_producer_sends_again(
        private_broker, capsys):
    """kafka-python 3.0.12 left an idempotent producer without a producer id once a retried batch expired:
    it sent nothing again and said nothing until close timed out (common.producer_recovery). The broker
    paused (SIGSTOP) past the delivery timeout: the records in flight expire and are reported at once;
    after it resumes, new records are delivered, each once."""
    import os
    import signal

    from producers.publish import make_tuned_producer

    s = private_broker.settings
    producer = make_tuned_producer(s, compression=None, linger_ms=5, request_timeout_ms=2000,
                                   delivery_timeout_ms=5000)
    stats, acked = Stats(), []

    def send(first: int, last: int) -> None:
        for i in range(first, last):
            future = producer.send(s.topic_transactions, key=f"card-{i % 7}".encode(), value=f"{i}".encode())
            future.add_callback(lambda _metadata, i=i: acked.append(i)).add_errback(stats.on_error)

    broker = private_broker.broker.pid()
    try:
        send(0, 100)
        wait_until(lambda: len(acked) == 100, 60, "the first records acknowledged")
        os.killpg(broker, signal.SIGSTOP)
        try:
            send(100, 200)                                      # in flight when the broker stops answering
            wait_until(lambda: stats.failed, 60, "the expired records reported")
            assert "delivery failed:" in capsys.readouterr().err   # at once, not at close
        finally:
            os.killpg(broker, signal.SIGCONT)
        sent = 200

        def delivering_again() -> bool:          # a record a second until one is acknowledged
            nonlocal sent
            send(sent, sent + 1)
            sent += 1
            return any(i >= 200 for i in acked)

        wait_until(delivering_again, 60, "a record sent after the pause acknowledged", interval=1.0)
        send(sent, sent + 100)
        wait_until(lambda: set(range(sent, sent + 100)) <= set(acked), 60, "the next records acknowledged")
        sent += 100
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    assert len(acked) + stats.failed == sent, (len(acked), stats.failed, sent)
    values = [int(r.value) for r in read_topic(s, s.topic_transactions)]
    assert len(values) == len(set(values)) and set(acked) <= set(values)      # each once, the expired in doubt


def test_replay_publishes_a_simulated_file_and_raw_sends_bad_lines_for_the_dlq(stack, topics, tmp_path, capsys):
    assert main(["simulate", "--seed", "23", "--customers", "1500", "--count", "2000", "--out", str(tmp_path)]) == 0
    lines = (tmp_path / "transactions.jsonl").read_bytes().splitlines()
    good_topic = topics("replay", partitions=12)
    assert main(["replay", str(tmp_path / "transactions.jsonl"), "--topic", good_topic, "--no-progress"]) == 0
    assert sorted(r.value for r in read_topic(stack, good_topic, min_records=2000)) == sorted(lines)

    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"\n".join(lines[:5] + [b'{"card_id": "card-000001", "amount": "ten"}'] + lines[5:10]) + b"\n")
    refused_topic, raw_topic = topics("refused", partitions=3), topics("raw", partitions=3)
    assert main(["replay", str(broken), "--topic", refused_topic, "--no-progress"]) == 2
    assert f"{broken}:6: " in capsys.readouterr().err
    assert read_topic(stack, refused_topic) == []
    assert main(["replay", str(broken), "--raw", "--topic", raw_topic, "--no-progress"]) == 0
    raw = read_topic(stack, raw_topic, min_records=11)
    assert len(raw) == 11
    assert [r.key for r in raw if r.value.startswith(b'{"card_id"')] == [b"card-000001"]


def test_load_reference_writes_profiles_to_redis_idempotently(redis_client, unique):
    world = build_world("default", seed=24, customers=500, id_prefix=f"{unique}-")
    counts = load_reference(redis_client, world)
    assert counts == {"customers": 500, "cards": world.n_cards, "merchants": len(world.merchant_ids)}
    customer = redis_client.hgetall(customer_key(world.customer_ids[0]))
    assert set(customer) == {"segment", "home_lat", "home_lon", "mean_amount", "std_amount"}
    assert float(customer["mean_amount"]) == round(float(world.mean_amount[0]), 2)
    card = redis_client.hgetall(card_key(world.card_ids[0]))
    assert card == {"customer_id": world.customer_ids[0], "issued": world.card_issued[0], "status": "active"}
    ecom = world.merchant_ids[-1]
    assert redis_client.hgetall(merchant_key(ecom))["lat"] == ""
    before = {k: redis_client.hgetall(k) for k in redis_client.scan_iter(match=f"*{unique}*", count=5000)}
    load_reference(redis_client, world)
    after = {k: redis_client.hgetall(k) for k in redis_client.scan_iter(match=f"*{unique}*", count=5000)}
    assert before == after and len(after) == 500 + world.n_cards + len(world.merchant_ids)
