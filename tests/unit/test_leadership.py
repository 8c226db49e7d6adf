"""The leader lock of a checkpoint root: one job leads, another stands by and takes over when it dies."""

import signal
import subprocess
import sys
import threading
import time

import pytest

from spark_job.leadership import LOCK_FILE, Leadership, holder_pid, lock_path

HOLD = """
import sys
from spark_job.leadership import Leadership
lead = Leadership(sys.argv[1])
assert lead.try_lead()
print("holding", flush=True)
sys.stdin.read()              # held until the test kills it
"""


def test_a_second_job_on_the_same_root_does_not_lead(tmp_path):
    first, second = Leadership(tmp_path), Leadership(tmp_path)
    assert first.try_lead()
    assert not second.try_lead()
    first.release()
    assert second.try_lead()
    second.release()


def test_a_standby_takes_over_when_the_leader_is_sigkilled(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert holder_pid(tmp_path / LOCK_FILE) == holder.pid
        standby, result = Leadership(tmp_path), {}
        assert not standby.try_lead(), "led while the other process held the lock"
        waiting = threading.Thread(target=lambda: result.setdefault("led", standby.lead(lambda: False, 0.01)))
        waiting.start()
        holder.send_signal(signal.SIGKILL)
        waiting.join(30)
        assert result == {"led": True}
        assert holder_pid(tmp_path / LOCK_FILE) != holder.pid
        standby.release()
    finally:
        holder.kill()
        holder.wait()


def test_a_standby_that_is_stopped_does_not_lead(tmp_path):
    leader = Leadership(tmp_path)
    assert leader.try_lead()
    asked = []
    deadline = time.monotonic() + 30

    def stopped() -> bool:
        asked.append(1)
        return len(asked) > 3 or time.monotonic() > deadline

    assert Leadership(tmp_path).lead(stopped, 0.001) is False
    assert len(asked) == 4
    leader.release()


def test_a_root_on_another_file_system_has_no_lock(tmp_path):
    assert lock_path("s3a://bucket/checkpoints") is None
    assert Leadership("hdfs://nn/checkpoints").lead(lambda: True) is True
    assert lock_path(f"file://{tmp_path}") == tmp_path / LOCK_FILE
