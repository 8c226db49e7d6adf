import threading

from common.kafka_clients import kafka_unreachable
from common.kafka_io import make_producer, read_topic
from common.waiting import wait_until
from spark_job.live_params import follow_params


def test_a_private_broker_survives_a_restart_with_its_data_and_a_standby_waits_for_it(private_broker):
    """What a standby detector job does when the broker is away as it starts, or goes away while it starts
    (spark_job.job.run): it waits, and reads the detectors' parameters once the broker is back. Meanwhile the
    supervisor's question, whether no broker answers (a failure then is not counted), says yes."""
    s = private_broker.settings
    producer = make_producer(s)
    producer.send(s.topic_transactions, key="card-a", value=b"one").get(timeout=30)
    producer.close()
    assert not kafka_unreachable(s)
    private_broker.broker.stop()
    assert kafka_unreachable(s, timeout=2)
    said: list[str] = []
    result: dict[str, object] = {}

    def start() -> None:
        follower, result["params"] = follow_params(s, wait=True, say=said.append, bootstrap_timeout_ms=2000)
        follower.close()                           # it returned, rather than raised

    waiter = threading.Thread(target=start)
    waiter.start()
    try:
        wait_until(lambda: len(said) >= 2, 60, "the standby to say it waits")
        assert said[0].startswith("the parameters could not be read (no Kafka broker answered")
        assert said[1].startswith("waiting for the Kafka broker") and "no Kafka broker answered" in said[1]
        assert waiter.is_alive()
    finally:
        private_broker.broker.up()
    wait_until(lambda: not waiter.is_alive(), 60, "the wait to end once the broker is back")
    assert result == {"params": {}} and said[-1].startswith("the Kafka broker answers again after")
    assert [r.value for r in read_topic(s, s.topic_transactions)] == [b"one"]
