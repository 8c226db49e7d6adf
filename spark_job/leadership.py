"""One detector job per checkpoint root, and a warm standby that takes over when it dies.

Spark's checkpoints have one writer: two drivers running the same queries would both append to their
offset and commit logs. So before its queries start, a job takes an exclusive lock (``flock``) on
``<checkpoint root>/leader.lock``. A job that finds it held *stands by*: it has started its JVM and Python
workers and rehearsed its queries (``spark_job.tuning.rehearsal``), and it waits for the lock. The kernel releases a
lock when the process holding it dies, however it dies (SIGKILL included), so the standby takes over at
once with a warm JVM instead of a restarted job paying the JVM's first minute on its backlog
(docs/performance.md, "A warm standby"). The alerts stay exactly once either way: the job that takes
over resumes the checkpoints, and its writer fences the old one's producer.

The lock is a local file: a checkpoint root on another file system (HDFS, S3) gets no lock, and the job
says so (run one job per checkpoint root there).
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from pathlib import Path
from typing import Callable

from common.settings import local_folder

log = logging.getLogger(__name__)

LOCK_FILE = "leader.lock"
STANDING_BY = "standing by"        # the log line's words a standby's log is watched for (demo.diamond)
POLL_S = 0.05                      # how often a standby tries the lock: the takeover's delay at most
STANDBY_NICE = 10                  # a standby's CPU weight while it rehearses: the leader's backlog goes first
AUTOGROUP = Path("/proc/self/autogroup")


class Leadership:
    """The lock of one checkpoint root; ``lead`` takes it (waiting, standing by, while another job holds it)."""

    def __init__(self, checkpoint_root: str | Path):
        self.path = lock_path(checkpoint_root)
        self.root = str(checkpoint_root)
        self._fd: int | None = None
        self._nice: int | None = None      # before ``stand_back``
        self._autogroup_nice: int | None = None

    def try_lead(self) -> bool:
        """Take the lock if it is free; True when this process holds it (or there is no lock to take)."""
        if self.path is None:
            return True
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)   # not inherited by the JVM
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)
        return True

    def stand_back(self) -> None:
        """Run this process, and the JVM and workers it starts from now on, at ``STANDBY_NICE``: a standby
        restarted next to a leader working off a backlog takes little of its CPU while it rehearses."""
        try:
            self._nice = os.getpriority(os.PRIO_PROCESS, 0)
            os.setpriority(os.PRIO_PROCESS, 0, max(self._nice, STANDBY_NICE))
        except OSError as error:
            log.warning("standby at normal priority: %s", error)
        # With the kernel's autogroups (sched_autogroup_enabled) a nice value weighs only against the threads
        # of its own session; sessions share the CPU by their autogroup's nice value. So a standby whose
        # leader runs in another session (another terminal; the chaos suite's jobs, each in a session of its
        # own) lowers its session's, until it leads.
        if not _in_my_session(holder_pid(self.path) if self.path is not None else None):
            self._autogroup_nice = autogroup_nice()
            if self._autogroup_nice is not None:
                _set_autogroup_nice(max(self._autogroup_nice, STANDBY_NICE))

    def lead(self, stopped: Callable[[], bool], poll_s: float = POLL_S) -> bool:
        """Hold the lock, standing by until it is free; False if ``stopped`` became true first. A standby that
        takes over gets its priority back (``stand_back``)."""
        if self.path is None:
            log.warning("no leader lock for the checkpoint root %s (not a local folder): run one detector job "
                        "per checkpoint root", self.root)
            return True
        if self.try_lead():
            log.info("leading: this job holds %s", self.path)
        else:
            holder = holder_pid(self.path)
            log.info("%s: the detector job of pid %s runs the queries of %s; this one takes over when it stops",
                     STANDING_BY, holder, self.root)
            began = time.monotonic()
            while not self.try_lead():
                if stopped():
                    return False
                time.sleep(poll_s)
            log.info("leading: took over from pid %s after %.1f s standing by", holder, time.monotonic() - began)
        if self._autogroup_nice is not None:
            _set_autogroup_nice(self._autogroup_nice)
            self._autogroup_nice = None
        if self._nice is not None:
            _restore_priority(self._nice)
            self._nice = None
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)          # closing the only descriptor releases the lock
            self._fd = None


def _restore_priority(nice: int) -> None:
    """Every thread of this process and of its descendants (the JVM, the Python workers) back at ``nice``:
    on Linux the nice value is a thread's."""
    from common.process_table import with_descendants

    failed = []
    for pid in with_descendants([os.getpid()]):
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                if os.getpriority(os.PRIO_PROCESS, int(task.name)) != nice:
                    os.setpriority(os.PRIO_PROCESS, int(task.name), nice)
            except ProcessLookupError:                 # the thread ended meanwhile
                continue
            except (OSError, ValueError) as error:     # no right to raise a priority
                failed.append(f"{task.name}: {error}")
    if failed:
        log.warning("%d threads stay at a lower priority (%s)", len(failed), failed[0])


def autogroup_nice() -> int | None:
    """The nice value of this process's session (its autogroup); None without autogroups."""
    try:
        return int(AUTOGROUP.read_text().split()[-1])      # "/autogroup-25 nice 0"
    except (OSError, ValueError, IndexError):
        return None


def _in_my_session(pid: int | None) -> bool:
    try:
        return pid is not None and os.getsid(pid) == os.getsid(0)
    except OSError:                 # gone: the lock is about to be free
        return False


def _set_autogroup_nice(nice: int) -> None:
    try:
        AUTOGROUP.write_text(str(nice))    # any value >= 0 without privileges
    except OSError as error:
        log.warning("the standby's session stays at autogroup nice %s: %s", autogroup_nice(), error)


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
