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


class Leadership:
    """The lock of one checkpoint root; ``lead`` takes it (waiting, standing by, while another job holds it)."""

    def __init__(self, checkpoint_root: str | Path):
        self.path = lock_path(checkpoint_root)
        self.root = str(checkpoint_root)
        self._fd: int | None = None

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

    def lead(self, stopped: Callable[[], bool], poll_s: float = POLL_S) -> bool:
        """Hold the lock, standing by until it is free; False if ``stopped`` became true first."""
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
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)          # closing the only descriptor releases the lock
            self._fd = None


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
