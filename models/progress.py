"""How ``python -m models train`` shows its progress: a line per step (the data, the features, each fold
of each candidate), under a rich progress bar on a terminal, as plain lines otherwise (a log file, the
demo reading the log, CI).

A reporter is a function ``(done, total, text)``: ``done`` of ``total`` steps are finished, ``text`` says
what just finished or what starts now.
"""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from typing import Callable, Iterator, TextIO

Reporter = Callable[[int, int, str], None]

log = logging.getLogger("models.training")


def log_reporter(done: int, total: int, text: str) -> None:
    """The default when nobody shows progress (tests, library callers): the training log."""
    log.info("[%d/%d] %s", done, total, text)


def plain_line(done: int, total: int, text: str) -> str:
    return f"[{done}/{total}] {text}"


@contextmanager
def terminal_progress(stream: TextIO | None = None) -> Iterator[Reporter]:
    """A reporter for the command line: rich's bar when ``stream`` (default stdout) is a terminal,
    plain lines (flushed at once) when it is not."""
    stream = stream or sys.stdout
    if not stream.isatty():
        def plain(done: int, total: int, text: str) -> None:
            print(plain_line(done, total, text), file=stream, flush=True)
        yield plain
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = Console(file=stream)
    with Progress(TextColumn("training"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console, transient=True) as bar:
        task = bar.add_task("", total=None)

        def rich(done: int, total: int, text: str) -> None:
            bar.update(task, completed=done, total=total, description=text[:48])
            bar.console.print(plain_line(done, total, text), highlight=False, markup=False)
        yield rich
