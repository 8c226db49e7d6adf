"""The Spark driver's class-data sharing archive, recorded once by ``deploy fetch``.

A Spark driver loads and verifies Spark's classes one by one before its first micro-batch, and a
restarted detector job pays for that again (docs/performance.md: how many, and what the archive saves). HotSpot can map classes from an archive instead of loading and verifying them one by
one (class-data sharing, ``-XX:SharedArchiveFile``); ``common.spark`` gives a local driver the archive
when one exists for this JVM and these jars. It is recorded by running ``spark_job.class_recording`` in
a child process with ``-XX:ArchiveClassesAtExit``: the JVM writes the archive as it exits. Without one
(none recorded, another JVM) everything works as before, only slower to start, so a failure to record
it is a warning, not an error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Callable

from common.settings import REPO_ROOT, Settings
from common.spark import class_archive_key, class_archive_path, class_archive_stamp, driver_class_archive
from common.waiting import wait_until

RECORD_TIMEOUT_S = 600
JVM_EXIT_TIMEOUT_S = 180


def build(settings: Settings, log: Callable[[str], None] = print) -> Path | None:
    """Record the archive unless a valid one exists; its path, or None (none to have for this driver, or
    recording failed)."""
    archive = class_archive_path(settings)
    if archive is None or driver_class_archive(settings) is not None:
        return archive
    log("recording the classes Spark loads, for a faster start (once, about a minute) ...")
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")     # two fetches at once: both record
    partial.unlink(missing_ok=True)
    try:
        done = subprocess.run([sys.executable, "-m", "spark_job.class_recording", str(partial)], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=RECORD_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError((done.stderr.strip().splitlines() or ["no output"])[-1])
        printed = re.search(r"^jvm-pid=(\d+)$", done.stdout, re.M)
        if printed is None:
            raise RuntimeError("the recording run printed no JVM pid")
        jvm = int(printed.group(1))
        # The JVM writes the archive as it exits, after the Python process that started it has gone.
        wait_until(lambda: not _alive(jvm), JVM_EXIT_TIMEOUT_S, "the Spark JVM to write its class archive",
                   interval=0.5)
        if not partial.exists():
            raise RuntimeError("the JVM exited without writing it")
    except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as error:
        log(f"warning: no Spark class archive ({error}); Spark starts without one")
        partial.unlink(missing_ok=True)
        return None
    os.replace(partial, archive)
    class_archive_stamp(archive).write_text(class_archive_key())
    return archive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
