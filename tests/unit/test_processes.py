"""ProcessGroup: children in their own process groups, restarted with their own command, all stopped."""

from deploy.processes import ProcessGroup, group_alive

WAIT_FOREVER = ["-c", "import signal; signal.pause()"]


def test_a_restart_reuses_the_command_and_nothing_is_left_behind(tmp_path):
    with ProcessGroup(tmp_path) as group:
        first = group.start("child", WAIT_FOREVER, {"MARK": "1"})
        group.kill("child")
        assert not group_alive(first.pid)
        again = group.restart("child")
        assert again.running() and again.cmd == first.cmd and again.env["MARK"] == "1" and again.restarts == 1
        other = group.start("other", ["-c", "print('done')"])
    assert group.leftovers() == []
    assert not group_alive(again.pid) and other.proc.poll() is not None


# Burns CPU in a grandchild (reaped by the child), in the child itself and in a grandchild that moved to a
# process group of its own (as PySpark's worker daemon does), then waits: the group's CPU counts all three. The work is measured in CPU seconds, not wall time, so a loaded machine only slows it.
BURN = r"""
import signal, subprocess, sys
BURN_03 = "import time\ns = time.process_time()\nwhile time.process_time() - s < 0.3: pass\n"
subprocess.run([sys.executable, "-c", BURN_03])
exec(BURN_03)
# Moves to a group of its own, burns, says so, and leaves when its parent does (a group kill misses it):
# its stdin is a pipe from the parent, which reaches end of file when the parent dies.
MOVER = ("import os, sys\nos.setpgid(0, 0)\n" + BURN_03 + "print('moved', flush=True)\nsys.stdin.read()\n")
mover = subprocess.Popen([sys.executable, "-c", MOVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
mover.stdout.readline()
print("burnt", flush=True)
signal.pause()
"""


def test_a_groups_cpu_seconds_count_its_processes_and_the_children_they_reaped(tmp_path):
    from common.waiting import wait_until
    from deploy.processes import group_cpu_seconds

    with ProcessGroup(tmp_path) as group:
        child = group.start("burner", ["-c", BURN])
        wait_until(lambda: "burnt" in child.tail(), 120, "the child to burn its CPU")
        assert 0.9 <= group_cpu_seconds(child.pid) < 5
        assert group.cpu_seconds()["burner"] >= 0.9
    assert group_cpu_seconds(child.pid) == 0.0       # stopped: nothing left to count
