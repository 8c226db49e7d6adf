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
