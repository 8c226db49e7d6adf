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


def test_a_root_on_another_file_system_or_shared_between_hosts_is_led_through_kafka(tmp_path):
    from common.settings import Settings, SettingsError
    from spark_job.leadership import KafkaLease, lease_group, leadership_for

    settings = Settings()
    assert lock_path("s3a://bucket/checkpoints") is None
    assert lock_path(f"file://{tmp_path}") == tmp_path / LOCK_FILE
    assert isinstance(leadership_for(settings, "hdfs://nn/checkpoints"), KafkaLease)
    assert isinstance(leadership_for(settings, tmp_path), Leadership)
    assert isinstance(leadership_for(settings.replace(leader_lease="kafka"), tmp_path), KafkaLease)
    with pytest.raises(SettingsError, match="FRAUD_LEADER_LEASE: expected one of auto, kafka, got 'nfs'"):
        leadership_for(settings.replace(leader_lease="nfs"), tmp_path)
    # one group per root, scoped like the writers' transactional ids
    assert lease_group(settings, "s3a://a/cp") != lease_group(settings, "s3a://b/cp")
    assert lease_group(settings, "s3a://a/cp").startswith(f"fraud-leader.{settings.topic_alerts}.")


class _Member:
    def __init__(self, member_id: str, given_in: int, waiting_since_ms: int = 0):
        from types import SimpleNamespace

        self.member_id = member_id
        self.metadata = SimpleNamespace(topics=["detectors.leader"], user_data=f"{given_in},{waiting_since_ms}".encode())


def _winner(*members: _Member) -> list[str]:
    from spark_job.leadership import keep_the_holder

    assignment = keep_the_holder().assign(None, list(members))
    return [member for member, given in assignment.items() if given.partitions()]


def test_the_lease_stays_with_its_holder_and_a_member_replaced_while_away_does_not_win_it_back():
    assert _winner(_Member("z", 3, 900), _Member("a", -1, 100)) == ["z"]    # a newcomer does not take it
    assert _winner(_Member("b", -1)) == ["b"]                               # the holder gone: the one left
    # The holder gone: the standby that has waited since 100, not the job restarted at 900 (id "a")
    assert _winner(_Member("b", -1, 100), _Member("a", -1, 900)) == ["b"]
    assert _winner(_Member("b", -1, 100), _Member("a", -1, 100)) == ["a"]   # a tie: the first by id
    assert _winner(_Member("old", 1), _Member("new", 3, 500)) == ["new"]    # old was replaced in generation 3


def test_a_member_claims_the_generation_it_was_first_given_the_lease_in():
    from types import SimpleNamespace

    from spark_job.leadership import keep_the_holder

    assignor = keep_the_holder()
    claim = lambda: int(assignor.metadata({"detectors.leader"}).user_data.split(b",")[0])      # noqa: E731
    assert claim() == -1
    assignor.on_assignment(SimpleNamespace(partitions=lambda: ["p0"]), 4)
    assignor.on_assignment(SimpleNamespace(partitions=lambda: ["p0"]), 5)
    assert claim() == 4
    assignor.on_assignment(SimpleNamespace(partitions=lambda: []), 6)
    assert claim() == -1
