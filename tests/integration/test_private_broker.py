import threading

from common.kafka_clients import wait_for_kafka
from common.kafka_io import make_producer, read_topic
from common.waiting import wait_until


def test_a_private_broker_survives_a_restart_with_its_data_and_a_wait_for_it_ends_when_it_is_back(private_broker):
    """The wait is what a standby detector job started during a broker outage does (spark_job.job.run)."""
    s = private_broker.settings
    producer = make_producer(s)
    producer.send(s.topic_transactions, key="card-a", value=b"one").get(timeout=30)
    producer.close()
    private_broker.broker.stop()
    said: list[str] = []
    result: dict[str, bool] = {}

    def wait() -> None:
        wait_for_kafka(s, say=said.append, probe_timeout=1)
        result["back"] = True                      # it returned, rather than raised

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        wait_until(lambda: said, 30, "the wait to say it waits")
        assert said[0].startswith("waiting for the Kafka broker") and "no Kafka broker answered" in said[0]
        assert waiter.is_alive()
    finally:
        private_broker.broker.up()
    wait_until(lambda: not waiter.is_alive(), 60, "the wait to end once the broker is back")
    assert result == {"back": True} and said[-1].startswith("the Kafka broker answers again after")
    assert [r.value for r in read_topic(s, s.topic_transactions)] == [b"one"]
