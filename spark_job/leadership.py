"""One detector job per checkpoint root, and a warm standby that takes over when it dies.

Spark's checkpoints have one writer: two drivers running the same queries would both append to their
offset and commit logs. So before its queries start, a job takes the lease of its checkpoint root. A job
that finds it held *stands by*: it has started its JVM and Python workers, rehearses its queries
(``spark_job.tuning.rehearsal``; it takes over at once if the lease comes free meanwhile) and waits for the
lease. The alerts stay exactly once either way: the job that takes over resumes the checkpoints, and its
writer fences the old one's producer (the same transactional ids). The lease has two homes
(``FRAUD_LEADER_LEASE``):

- ``Leadership``, a file lock (``flock``) on ``<checkpoint root>/leader.lock``, for a root on a local
  folder. The kernel releases it when the process holding it dies, however it dies (SIGKILL included), so
  the standby takes over within ``POLL_S``, with a warm JVM (docs/performance.md, "A warm standby").
- ``KafkaLease``, for any other root (``hdfs://``, ``s3a://``; or a folder shared between hosts, whose
  file locks are not to be trusted): the one partition of ``FRAUD_TOPIC_LEADER``, held by one member of
  the consumer group named after the root, which the lease's own assignor (``KeepTheHolder``) leaves with
  its holder when others join. A leader that dies stops heartbeating, and the group coordinator gives the partition
  to a standby after ``LEASE_SESSION_MS``; one stopped by a signal leaves the group at once.
  **The loser**: a leader the coordinator no longer names as the partition's holder (asked every
  supervision round, about a second, and before each restart), or which could not ask it for
  ``LEASE_SESSION_MS`` since it last answered (cut off, or stopped: another may lead by now), stops every
  query at once and exits with status ``LEASE_LOST``; its process manager starts it again, as the
  standby. It never starts a query without the lease; a transaction it still had open when the other
  took over is fenced by the new leader's writer (the same transactional ids).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import time
import uuid
from pathlib import Path
from typing import Callable

from common.kafka_admin import admin_client
from common.settings import Settings, SettingsError, local_folder

log = logging.getLogger(__name__)

LOCK_FILE = "leader.lock"
STANDING_BY = "standing by"        # the log line's words a standby's log is watched for (demo.diamond)
LEADING = "leading"                # and a leader's
POLL_S = 0.05                      # how often a standby tries the lock: the takeover's delay at most
LEASE_SESSION_MS = 30_000          # a Kafka lease's holder silent this long has lost it (a broker's failover: ~10 s)
LEASE_JOIN_S = 30.0                # how long a job waits to learn whether the Kafka lease is free
LEASE_LOST = 3                     # the exit status of a job that lost its lease
LEASES = ("auto", "kafka")


def leadership_for(settings: Settings, checkpoint_root: str | Path) -> "Leadership | KafkaLease":
    """The lease of ``checkpoint_root`` as ``settings.leader_lease`` chooses it (see the module's text)."""
    if settings.leader_lease not in LEASES:
        raise SettingsError(f"setting FRAUD_LEADER_LEASE: expected one of {', '.join(LEASES)}, "
                            f"got {settings.leader_lease!r}")
    if settings.leader_lease == "kafka" or local_folder(checkpoint_root) is None:
        return KafkaLease(settings, checkpoint_root)
    return Leadership(checkpoint_root)


class Leadership:
    """The file lock of a checkpoint root on a local folder; ``lead`` takes it (waiting, standing by, while
    another job holds it)."""

    def __init__(self, checkpoint_root: str | Path):
        self.path = lock_path(checkpoint_root)
        if self.path is None:
            raise ValueError(f"{checkpoint_root} is not a local folder: its lease is a KafkaLease")
        self.root = str(checkpoint_root)
        self._fd: int | None = None
        self._held = False

    def try_lead(self) -> bool:
        """Take the lock if it is free; True when this process holds it."""
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)   # not inherited by the JVM
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not self._held:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
            self._held = True
        return True

    def lead(self, stopped: Callable[[], bool], poll_s: float = POLL_S) -> bool:
        """Hold the lock, standing by until it is free; False if ``stopped`` became true first."""
        return _stand_by(self.try_lead, stopped, poll_s, f"the detector job of pid {holder_pid(self.path)}",
                         str(self.path), self.root)

    def held(self) -> bool:
        return self._held                 # the kernel's lock lasts as long as this process holds it

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)          # closing the only descriptor releases the lock
            self._fd, self._held = None, False


class KafkaLease:
    """The lease of a checkpoint root on any file system: the one partition of ``settings.topic_leader``
    in the consumer group ``lease_group(settings, root)`` (see the module's text)."""

    def __init__(self, settings: Settings, checkpoint_root: str | Path, session_timeout_ms: int = LEASE_SESSION_MS):
        from kafka import TopicPartition

        self.settings, self.root, self.session_timeout_ms = settings, str(checkpoint_root), session_timeout_ms
        self.group = lease_group(settings, self.root)
        self.partition = TopicPartition(settings.topic_leader, 0)
        self.client_id = f"fraud-leader-{uuid.uuid4().hex[:12]}"     # how the coordinator names this job
        self._consumer = None
        self._admin, self._admin_client = contextlib.ExitStack(), None
        self._confirmed_at: float | None = None     # when the coordinator last said this job holds it
        self._lost = False

    def _joined(self):
        if self._consumer is None:
            from common.kafka_io import make_consumer

            self._consumer = make_consumer(self.settings, group_id=self.group,
                                           partition_assignment_strategy=(keep_the_holder(),),
                                           session_timeout_ms=self.session_timeout_ms,
                                           heartbeat_interval_ms=self.session_timeout_ms // 10,
                                           client_id=self.client_id)
            self._consumer.subscribe([self.settings.topic_leader])
        return self._consumer

    def try_lead(self, wait_s: float = LEASE_JOIN_S) -> bool:
        """Join the group (waiting up to ``wait_s`` for the join to complete); True when this job holds the
        partition. A broker that does not answer: False, it is asked again at the next call."""
        from kafka.errors import KafkaError

        from common.kafka_clients import KafkaConnectError

        if self._lost:
            return False
        try:
            consumer = self._joined()
            _settle(consumer, wait_s)           # joined: assigned the partition or not
        except (KafkaError, KafkaConnectError) as error:
            log.warning("the lease of %s cannot be asked for now: %s", self.root, str(error).splitlines()[0])
            return False
        return self.held()

    def lead(self, stopped: Callable[[], bool], poll_s: float = 0.5) -> bool:
        """Hold the lease, standing by until it is free; False if ``stopped`` became true first."""
        return _stand_by(lambda: self.try_lead(wait_s=poll_s), stopped, 0.0, f"another member of group {self.group}",
                         f"partition 0 of {self.settings.topic_leader} in group {self.group}", self.root)

    def held(self, poll_ms: int = 100) -> bool:
        """Whether this job holds the lease, as the group's coordinator says (``holder``). While it cannot
        say (a broker's failover, a rebalance under way) the lease lasts ``session_timeout_ms`` from its last
        word: a member silent that long may have been replaced. Once lost, lost for good: the job stops."""
        consumer = self._consumer
        if consumer is None or self._lost:
            return False
        try:
            consumer.poll(timeout_ms=poll_ms)       # heartbeats; takes part in a rebalance another member began
            _settle(consumer, self.session_timeout_ms / 1000)   # a rebalance revokes the partition before it assigns it
        except Exception as error:  # noqa: BLE001 - the coordinator's word decides below
            log.warning("the lease of %s: %s", self.root, str(error).splitlines()[0])
        now = time.monotonic()
        if self.partition in consumer.assignment():
            holder = self.holder()
            if holder == self.client_id:
                self._confirmed_at = now
                return True
            if holder is None and self._confirmed_at is not None and now - self._confirmed_at <= \
                    self.session_timeout_ms / 1000:
                return True
        self._lost = self._confirmed_at is not None
        return False

    def holder(self) -> str | None:
        """The client id of the member the coordinator has given the partition ("": none); None when it cannot
        say now (no answer, or a rebalance under way: it shows assignments only in a stable group)."""
        try:
            if self._admin_client is None:
                self._admin_client = self._admin.enter_context(admin_client(self.settings, request_timeout_ms=5000))
            group = self._admin_client.describe_groups([self.group])[self.group]
        except Exception as error:  # noqa: BLE001 - kafka-python's errors and a lost connection alike
            log.warning("the lease of %s: its coordinator does not say who holds it (%s)", self.root,
                        str(error).splitlines()[0] if str(error) else type(error).__name__)
            return None
        if group.get("error") or group.get("group_state") != "Stable":
            return None
        for member in group.get("members", []):
            for assigned in (member.get("member_assignment") or {}).get("assigned_partitions", []):
                if assigned["topic"] == self.partition.topic and self.partition.partition in assigned["partitions"]:
                    return member["client_id"]
        return ""

    def release(self) -> None:
        if self._consumer is not None:
            self._consumer.close()              # leaves the group: a standby gets the partition at once
            self._consumer = None
        self._admin.close()
        self._admin_client = None


def _settle(consumer, within_s: float) -> None:
    """Poll (heartbeats, the join, a rebalance; the topic has no records) until the group is stable, at most
    ``within_s``."""
    deadline = time.monotonic() + within_s
    consumer.poll(timeout_ms=0)
    while not consumer._coordinator.stable() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)


def keep_the_holder():
    """The lease's partition assignor (an instance: each consumer's own)."""
    from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

    class KeepTheHolder(AbstractPartitionAssignor):
        """Partition 0 stays with the member that was given it last (each member says in its subscription
        the generation it was given it in: a member replaced while it was away claims an older one); when
        none holds it, it goes to the member that has waited longest (a warm standby, not a job restarted
        after the leader's death that joins in the same rebalance). The others get nothing. Kafka's sticky
        assignors move it less predictably (kafka-python's cooperative one once assigned it to no one)."""

        name, version = "fraud-lease", 0

        def __init__(self):
            self.given_in = -1                  # the generation this member was given the partition in
            self.waiting_since_ms = time.time_ns() // 1_000_000

        def assign(self, cluster, members):
            first = min((m.member_id for m in members), default=None)

            def claim(member):
                given_in, since = (member.metadata.user_data or b"-1,0").decode().split(",")
                return int(given_in), -int(since), member.member_id == first

            winner = max(members, key=claim).member_id if members else None
            topics = {topic for m in members for topic in m.metadata.topics}
            return {m.member_id: ConsumerProtocolAssignment(
                        self.version, [(topic, [0]) for topic in sorted(topics)] if m.member_id == winner else [],
                        b"") for m in members}

        def metadata(self, topics):
            return ConsumerProtocolSubscription(self.version, list(topics),
                                                f"{self.given_in},{self.waiting_since_ms}".encode())

        def on_assignment(self, assignment, generation):
            if not assignment.partitions():
                self.given_in = -1
            elif self.given_in < 0:             # kept while it keeps the partition
                self.given_in = generation

    return KeepTheHolder()


def _stand_by(try_lead: Callable[[], bool], stopped: Callable[[], bool], poll_s: float, holder: str, what: str,
              root: str) -> bool:
    """Stand by until ``try_lead()`` takes the lease, saying so; False once ``stopped()``."""
    if try_lead():
        log.info("%s: this job holds %s", LEADING, what)
        return True
    log.info("%s: %s runs the queries of %s; this one takes over when it stops", STANDING_BY, holder, root)
    began = time.monotonic()
    while not try_lead():
        if stopped():
            return False
        time.sleep(poll_s)
    log.info("%s: took over from %s after %.1f s standing by", LEADING, holder, time.monotonic() - began)
    return True


def lease_group(settings: Settings, checkpoint_root: str) -> str:
    """The consumer group of a checkpoint root's Kafka lease: scoped by the alerts topic like the writers'
    transactional ids, one per root."""
    return f"fraud-leader.{settings.topic_alerts}.{hashlib.sha256(checkpoint_root.encode()).hexdigest()[:16]}"


def holder_pid(path: str | Path) -> int | None:
    """The pid the lock's holder wrote into ``path`` (None: none written yet, or no file)."""
    try:
        text = Path(path).read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def lock_path(checkpoint_root: str | Path) -> Path | None:
    """Where the lock of ``checkpoint_root`` is (None: not a local folder, no lock)."""
    folder = local_folder(checkpoint_root)
    return folder / LOCK_FILE if folder is not None else None
