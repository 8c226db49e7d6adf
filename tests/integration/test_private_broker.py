from common.kafka_io import make_producer, read_topic


def test_a_private_broker_survives_a_restart_with_its_data(private_broker):
    s = private_broker.settings
    producer = make_producer(s)
    producer.send(s.topic_transactions, key="card-a", value=b"one").get(timeout=30)
    producer.close()
    private_broker.broker.stop()
    private_broker.broker.up()
    assert [r.value for r in read_topic(s, s.topic_transactions)] == [b"one"]
