"""The leader lock of a checkpoint root: one job leads, another stands by and takes over when it dies."""

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

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


def test_a_standby_runs_at_a_lower_priority_until_it_takes_over(tmp_path):
    """Its children too (the JVM and the Python workers start from the standby): every thread is back at
    the priority it had once it leads. The leader runs in the same session: the session's autogroup, which
    the leader shares, is left alone."""
    script = f"""
import os, subprocess, sys, threading
from spark_job.leadership import Leadership, autogroup_nice
leader, standby = Leadership(sys.argv[1]), Leadership(sys.argv[1])
assert leader.try_lead() and not standby.try_lead()
before = os.getpriority(os.PRIO_PROCESS, 0), autogroup_nice()
standby.stand_back()
child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
worker = threading.Thread(target=lambda: child.wait())
worker.start()
niced = os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, child.pid), autogroup_nice()
leader.release()
assert standby.lead(lambda: False, 0.001)
after = os.getpriority(os.PRIO_PROCESS, 0), os.getpriority(os.PRIO_PROCESS, child.pid), autogroup_nice()
child.stdin.close()
worker.join()
print(*before, *niced, *after)
"""
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=60,
                         start_new_session=True)
    assert out.returncode == 0, out.stderr
    nice, group, *niced_and_after = out.stdout.split()
    assert niced_and_after == [str(max(int(nice), 10))] * 2 + [group] + [nice, nice, group]


STANDBY = """
import sys
from spark_job.leadership import Leadership, autogroup_nice
standby = Leadership(sys.argv[1])
assert not standby.try_lead()
before = autogroup_nice()
standby.stand_back()
print(before, autogroup_nice(), flush=True)
assert standby.lead(lambda: False, 0.001)
print(autogroup_nice(), flush=True)
"""


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="this kernel has no autogroups")
def test_a_standby_whose_leader_runs_in_another_session_lowers_its_sessions_autogroup(tmp_path):
    """With autogroups, sessions share the CPU as groups: a nice value alone left a standby's start (its
    JVM, its rehearsal) half of a core against the leader's catch-up in the chaos suite."""
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        standby = subprocess.Popen([sys.executable, "-c", STANDBY, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                                   start_new_session=True)
        before, standing_by = standby.stdout.readline().split()
        holder.kill()
        holder.wait()
        led = standby.stdout.readline().strip()
        assert standby.wait(30) == 0
        assert (standing_by, led) == (str(max(int(before), 10)), before)
    finally:
        holder.kill()
        holder.wait()
