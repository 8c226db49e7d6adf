"""The lease of a checkpoint root off local folders (spark_job.leadership.KafkaLease), on the real broker:
one member of its consumer group leads, a job joining later does not take the partition from it, a
standby leads once the leader leaves or dies, and a leader cut off longer than the session timeout knows
it has lost the lease the moment it runs again."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from common.settings import REPO_ROOT
from common.waiting import wait_until
from spark_job.leadership import KafkaLease

pytestmark = pytest.mark.integration

SESSION_MS = 6_000           # the broker's least (group.min.session.timeout.ms)

HOLD = """
import sys, time
from common.settings import get_settings
from spark_job.leadership import KafkaLease
lease = KafkaLease(get_settings(), sys.argv[1], session_timeout_ms=int(sys.argv[2]))
assert lease.try_lead()
print("holding", flush=True)
while True:                    # what the job's supervision asks every round, and when it began to ask
    asked_at = time.monotonic()
    print("held" if lease.held(poll_ms=200) else "lost", asked_at, flush=True)   # its poll paces the loop
"""


@pytest.fixture
def root(unique):
    return f"s3a://test-bucket/{unique}/checkpoints"


@pytest.fixture
def lease_settings(stack, topics):
    return stack.replace(topic_leader=topics("leader"))


def _lease(settings, root) -> KafkaLease:
    return KafkaLease(settings, root, session_timeout_ms=SESSION_MS)


def test_one_job_leads_a_later_one_stands_by_and_leads_once_the_first_leaves(lease_settings, root):
    first, second, other_root = _lease(lease_settings, root), _lease(lease_settings, root), \
        _lease(lease_settings, root + "-elsewhere")
    try:
        assert first.try_lead()
        with _Supervising(first) as checks:             # as the leading job asks, every round
            assert not second.try_lead()
            assert first.holder() == first.client_id, "the partition moved to the member that joined later"
        assert checks == {True}
        assert other_root.try_lead(), "another checkpoint root has a lease of its own"
        first.release()
        assert second.lead(lambda: False)
        assert second.holder() == second.client_id
    finally:
        for lease in (first, second, other_root):
            lease.release()


class _Supervising:
    """``lease.held()`` every 0.2 s in a thread, as the job's supervision asks; the answers it got."""

    def __init__(self, lease):
        self.lease, self.answers, self.done = lease, set(), threading.Event()
        self.thread = threading.Thread(target=self._ask)

    def _ask(self):
        while not self.done.wait(0.2):
            self.answers.add(self.lease.held())

    def __enter__(self) -> set:
        self.thread.start()
        return self.answers

    def __exit__(self, *_):
        self.done.set()
        self.thread.join()


def test_a_standby_leads_after_the_leader_is_sigkilled(lease_settings, root):
    with _held_elsewhere(lease_settings, root) as (holder, standby):
        os.killpg(holder.pid, signal.SIGKILL)
        assert _leads(standby)


def test_a_leader_cut_off_longer_than_the_session_knows_at_once_that_it_lost_the_lease(lease_settings, root):
    """SIGSTOP: no heartbeat, the coordinator gives the partition to the standby; on SIGCONT the first thing
    the old leader's check says is "lost", never "held" again."""
    with _held_elsewhere(lease_settings, root) as (holder, standby):
        os.kill(holder.pid, signal.SIGSTOP)
        assert _leads(standby)
        resumed_at = time.monotonic()                   # one clock for both processes (CLOCK_MONOTONIC)
        os.kill(holder.pid, signal.SIGCONT)
        after = []
        while len(after) < 10:
            status, asked_at = holder.stdout.readline().split()
            if float(asked_at) >= resumed_at:           # asked after it ran again
                after.append(status)
        assert after == ["lost"] * 10, after
        assert standby.held()


@contextlib.contextmanager
def _held_elsewhere(settings, root):
    """A process holding the lease of ``root``, and a lease of this process that stands by."""
    holder, standby = _holder(settings, root), _lease(settings, root)
    try:
        assert not standby.try_lead(wait_s=5)
        yield holder, standby
    finally:
        standby.release()
        _kill(holder)


def _leads(standby: KafkaLease, within_s: float = 120) -> bool:
    began = time.monotonic()
    return standby.lead(lambda: time.monotonic() - began > within_s)


def _holder(settings, root) -> subprocess.Popen:
    env = {**os.environ, **settings.to_env()}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, root, str(SESSION_MS)], cwd=REPO_ROOT, env=env,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    assert holder.stdout.readline().strip() == "holding"
    assert holder.stdout.readline().split()[0] == "held"
    return holder


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
