"""Child processes that are stopped, all of them, whatever happens: for the demo, the e2e and chaos suites.

Every service runs in its own process group, so stopping it also stops what it started (the Spark
driver's JVM and Python workers, Faust's threads). ``ProcessGroup`` is a context manager: leaving it
(normally, by an exception, Ctrl-C or SIGTERM) stops every child, SIGTERM first and SIGKILL after a
grace period, and waits until each group is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from common.process_table import process_table, with_descendants
from common.settings import REPO_ROOT
from common.waiting import wait_until


@dataclass
class Child:
    name: str
    cmd: list[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen | None = None
    restarts: int = 0
    started_at: float = field(default=0.0)
    log_offset: int = 0                    # the log's size when this run of it started (a restart appends)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 20) -> str:
        return tail_file(self.log_path, lines)

    def output(self) -> str:
        """What this run of it has written to its log so far."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.log_offset)
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""


def tail_file(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a log file ("" if it does not exist yet)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Only zombies left (reaped by nobody yet) count as gone.
    return any(group == pgid and state != "Z" for _, group, _, state in process_table().values())


def group_cpu_seconds(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of group ``pgid``, their descendants
    wherever they moved (PySpark's worker daemon makes a process group of its own) and the children they
    reaped: a service's cost, which a loaded machine does not inflate the way it does wall time."""
    table = process_table()
    seen = with_descendants([pid for pid, (_, group, *_rest) in table.items() if group == pgid], table)
    return sum(table[pid][2] for pid in seen) / os.sysconf("SC_CLK_TCK")


class ProcessGroup:
    def __init__(self, log_dir: Path, base_env: dict[str, str] | None = None):
        self.log_dir = log_dir
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.children: dict[str, Child] = {}
        log_dir.mkdir(parents=True, exist_ok=True)

    def start(self, name: str, args: Sequence[str], env: dict[str, str] | None = None) -> Child:
        """Start ``python args...`` (this interpreter) as ``name``, output to ``<log_dir>/<name>.log``."""
        previous = self.children.get(name)
        if previous is not None and previous.running():
            raise RuntimeError(f"{name} is already running (pid {previous.pid})")
        child = Child(name, [sys.executable, *args], {**self.base_env, **(env or {})}, self.log_dir / f"{name}.log",
                      restarts=previous.restarts if previous else 0)
        with open(child.log_path, "ab") as log:
            child.log_offset = log.tell()
            child.proc = subprocess.Popen(child.cmd, cwd=REPO_ROOT, env=child.env, stdout=log,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                          start_new_session=True)
        child.started_at = time.monotonic()
        self.children[name] = child
        return child

    def cpu_seconds(self) -> dict[str, float]:
        """``group_cpu_seconds`` of each running child (each runs in a process group of its own)."""
        return {name: group_cpu_seconds(child.pid) for name, child in self.children.items() if child.running()}

    def restart(self, name: str) -> Child:
        """Start ``name`` again with the command and environment it had."""
        previous = self.children[name]
        child = self.start(name, previous.cmd[1:], previous.env)
        child.restarts += 1
        return child

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout: float = 30.0) -> None:
        """Send ``sig`` to the whole group of ``name`` and wait until every process of it is gone."""
        child = self.children[name]
        if child.proc is None:
            return
        pgid = child.proc.pid
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        try:
            wait_until(lambda: child.proc.poll() is not None and not group_alive(pgid), timeout,
                       f"{name} to stop", interval=0.1)
        except TimeoutError:
            if sig == signal.SIGKILL:
                raise
            self.kill(name, signal.SIGKILL)

    def stop_all(self, grace: float = 20.0) -> None:
        for name in reversed(list(self.children)):
            if self.children[name].proc is not None:
                self.kill(name, signal.SIGTERM, timeout=grace)

    def leftovers(self) -> list[str]:
        """Children (or their descendants) still alive: should be empty after ``stop_all``."""
        return [name for name, child in self.children.items() if child.proc and group_alive(child.proc.pid)]

    def __enter__(self) -> "ProcessGroup":
        self._previous = signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.stop_all()
        finally:
            signal.signal(signal.SIGTERM, self._previous)


def _raise_keyboard_interrupt(*_args) -> None:
    raise KeyboardInterrupt
