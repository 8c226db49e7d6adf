"""The machine's processes as ``/proc`` lists them (Linux): who is whose parent, group and CPU time."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable


def process_table() -> dict[int, tuple[int, int, int, str]]:
    """pid -> (parent pid, process group, CPU ticks: user + system of itself and the children it reaped,
    state), from ``/proc/<pid>/stat``."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            table[int(entry.name)] = (int(fields[1]), int(fields[2]), sum(int(value) for value in fields[11:15]),
                                      fields[0])
    return table


def with_descendants(roots: Iterable[int], table: dict[int, tuple] | None = None) -> set[int]:
    """``roots`` and every live descendant of theirs, wherever they moved (another process group included)."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (parent, *_rest) in table.items():
        children.setdefault(parent, []).append(pid)
    todo, seen = list(roots), set()
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(children.get(pid, []))
    return seen
