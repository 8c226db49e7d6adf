"""The detector job's standby (spark_job.leadership, spark_job.job), as a process: a standby still rehearsing
takes over the moment its leader goes, a job stopped while it rehearses leaves nothing of the rehearsal
behind, and a leader that lost its Kafka lease stops its queries and exits. The leader is the test itself, holding the checkpoint root's lock; the job is ``python -m spark_job``
with a rehearsal far longer than any deadline here (a job that waited for it would fail them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from common.kafka_admin import admin_client
from common.kafka_io import make_producer, read_topic
from common.settings import REPO_ROOT
from common.waiting import wait_until
from spark_job.leadership import LEASE_LOST, KafkaLease, Leadership
from spark_job.query_names import REHEARSAL_PREFIX
from tests.builders import encode, txn

pytestmark = pytest.mark.integration

REHEARSAL_S = 900            # never reached: each test ends the rehearsal long before
JOB_START_S = 300            # a JVM and the rehearsal's first query on two busy cores


@pytest.fixture
def job_settings(stack, topics, tmp_path, unique):
    return stack.replace(topic_transactions=topics("transactions"), topic_alerts=topics("alerts"),
                         topic_alert_markers=topics("markers", cleanup__policy="compact"), topic_dlq=topics("dlq"),
                         checkpoint_root=str(tmp_path / "checkpoints"), run_dir=tmp_path / "run",
                         sinks_namespace=f"test-standby-{unique}", metrics_enabled=False)


class _Job:
    """``python -m spark_job double_swipe`` rehearsing for ``rehearsal_s``, its log in a file."""

    def __init__(self, settings, log_path: Path, rehearsal_s: float = REHEARSAL_S):
        self.settings, self.log_path = settings, log_path
        env = {**os.environ, **settings.to_env(), "FRAUD_DETECTOR_WARMUP_S": str(rehearsal_s),
               "FRAUD_SPARK_LOG_LEVEL": "ERROR"}
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "spark_job", "double_swipe", "--no-dlq"],
                                            cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def rehearsal_topics(self) -> set[str]:
        with admin_client(self.settings) as admin:
            return {t for t in admin.list_topics() if t.startswith(f"{self.settings.topic_transactions}.{REHEARSAL_PREFIX}")}

    def says(self, text: str) -> bool:
        """Whether its log has ``text``; raises if it exited."""
        if self.process.poll() is not None:
            raise AssertionError(f"the job exited with {self.process.returncode}:\n{self.log()[-3000:]}")
        return text in self.log()

    def rehearsing(self) -> bool:
        """Its rehearsal's queries run and it publishes their transactions."""
        self.says("")
        base = f"{self.settings.topic_transactions}.{REHEARSAL_PREFIX}"
        topic = next((t for t in self.rehearsal_topics() if t.startswith(base) and t.count(".") == base.count(".")),
                     None)
        return topic is not None and bool(read_topic(self.settings, topic, timeout=2,
                                                     isolation_level="read_uncommitted"))

    def stop(self) -> int:
        """SIGTERM to the job's process, as a container stop sends it; its exit status."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=120)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def nothing_of_the_rehearsal_left(self) -> None:
        assert not self.rehearsal_topics()
        assert not [p.name for p in Path(self.settings.checkpoint_root).glob(f"{REHEARSAL_PREFIX}*")]
        assert not [p.name for p in (Path(self.settings.run_dir) / "writers").glob(f"{REHEARSAL_PREFIX}*")]


def test_a_standby_still_rehearsing_takes_over_when_the_leader_goes(job_settings, tmp_path):
    s = job_settings
    leader = Leadership(s.checkpoint_root)
    assert leader.try_lead()
    job = _Job(s, tmp_path / "standby.log")
    try:
        wait_until(job.rehearsing, JOB_START_S, "the standby to rehearse", interval=1.0)
        leader.release()                                     # the leader is gone
        wait_until(lambda: job.says("spark_job: running "), JOB_START_S, "the standby to start its queries")
        assert "cut short: the leader has gone: this job takes over" in job.log()
        job.nothing_of_the_rehearsal_left()
        producer = make_producer(s)
        for value in (txn(1, card="card-standby", amount=42.0, merchant="m-1"),
                      txn(2, card="card-standby", amount=42.0, merchant="m-1", seconds=5)):
            producer.send(s.topic_transactions, key=value["card_id"].encode(), value=encode(value))
        producer.close()
        alerts = wait_until(lambda: [json.loads(r.value) for r in read_topic(s, s.topic_alerts, timeout=5)] or None,
                            JOB_START_S, "the double swipe's alert")
        assert [a["detector"] for a in alerts] == ["double_swipe"]
        assert job.stop() == 0
    finally:
        leader.release()
        if job.process.poll() is None:
            job.stop()


def test_a_job_stopped_while_it_rehearses_leaves_nothing_of_it_behind(job_settings, tmp_path):
    job = _Job(job_settings, tmp_path / "job.log")
    try:
        wait_until(job.rehearsing, JOB_START_S, "the job to rehearse", interval=1.0)
        assert job.stop() == 0
        assert "cut short: the job is stopping" in job.log()
        assert "stopped before its queries started" in job.log()
        job.nothing_of_the_rehearsal_left()
    finally:
        if job.process.poll() is None:
            job.stop()


def test_a_leader_that_lost_its_kafka_lease_stops_every_query_and_exits(job_settings, topics, tmp_path):
    """Its process group frozen (SIGSTOP) past the lease's session: the coordinator gives the partition to
    the standby (this test); once running again, the job learns it at its next round and exits."""
    s = job_settings.replace(leader_lease="kafka", topic_leader=topics("leader"))
    job = _Job(s, tmp_path / "leader.log", rehearsal_s=0)
    standby = KafkaLease(s, s.checkpoint_root)
    try:
        wait_until(lambda: job.says("spark_job: running "), JOB_START_S, "the job to lead through Kafka and start")
        assert "leading: this job holds partition 0 of" in job.log()
        assert not standby.try_lead(wait_s=5)
        os.killpg(job.process.pid, signal.SIGSTOP)
        try:
            assert standby.lead(lambda: False)
        finally:
            os.killpg(job.process.pid, signal.SIGCONT)
        assert job.process.wait(timeout=120) == LEASE_LOST
        assert f"lost the lease of {s.checkpoint_root} to another job: every query stopped" in job.log()
        assert standby.held()
    finally:
        standby.release()
        if job.process.poll() is None:
            job.stop()
