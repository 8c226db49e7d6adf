"""Errors a user can read: how every command line of the project ends on an expected failure.

An expected failure (a missing or unreadable file, an unknown name, Kafka or Redis not running, no
trained model, an option value that makes no sense) ends a command with ONE line on stderr,
``<prog>: error: <what went wrong and what to do>``, and a non-zero exit status. A traceback means a
bug, never a mistake of the user's.

- ``UserError``: raise it with the line the user should read.
- ``run_command(main, prog)``: what each ``__main__`` runs. It turns ``UserError``, the clear
  connection errors of ``common.kafka_clients`` and ``common.redis_clients``, a bad setting
  (``common.settings.SettingsError``), a missing or unreadable file, and the entry point's own
  ``expected`` exceptions into that line. ``main`` itself still raises, so tests can look at the error.
- ``ArgumentParser``: argparse's parser whose errors are that one line too, ``<prog>: error: <message>``
  (argparse prints its usage line first; ``--help`` shows it).
- ``positive_int``, ``positive_float``, ``non_negative_float``, ``fraction``, ``readable_file``:
  argparse ``type=`` functions that refuse values that make no sense.

Exit statuses: ``USAGE`` (2, argparse's) when the command line or its input is wrong, ``UNAVAILABLE``
(1) when something the command needs is missing or not running (a broker, Redis, a model).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, NoReturn

USAGE = 2
UNAVAILABLE = 1

# How long a command waits for Kafka or Redis to answer before it says they are not running.
CONNECT_CHECK_SECONDS = 5.0


class UserError(Exception):
    """An expected failure: ``message`` is what the user reads (one line), ``exit_code`` the status."""

    def __init__(self, message: str, exit_code: int = USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def one_line(text: object) -> str:
    """``text`` on one line: newlines and runs of white space become one space."""
    return " ".join(str(text).split())


def describe_os_error(error: OSError) -> str:
    """``No such file or directory: FILE`` rather than ``[Errno 2] No such file or directory: 'FILE'``."""
    reason = error.strerror or type(error).__name__
    return f"{reason}: {error.filename}" if error.filename is not None else reason


def _expected() -> dict[type[BaseException], int]:
    from common.kafka_clients import KafkaConnectError
    from common.redis_clients import RedisUnreachableError
    from common.settings import SettingsError

    return {KafkaConnectError: UNAVAILABLE, RedisUnreachableError: UNAVAILABLE, SettingsError: USAGE}


FILE_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)


def run_command(main: Callable[[], int | None], prog: str,
                expected: tuple[type[BaseException], ...] = (), expected_exit_code: int = UNAVAILABLE) -> int:
    """Run ``main`` (a ``__main__``'s entry point, reading ``sys.argv``) and return its exit status; an
    expected failure is printed as ``<prog>: error: <message>`` on one line instead of a traceback.
    ``expected``: the entry point's own exception types whose message is for the user (e.g. the model
    registry's), ended with ``expected_exit_code``."""
    known = _expected()
    try:
        return main() or 0
    except UserError as error:
        return fail(prog, str(error), error.exit_code)
    except FILE_ERRORS as error:
        return fail(prog, describe_os_error(error), USAGE)
    except tuple(known) as error:
        return fail(prog, str(error), next(code for kind, code in known.items() if isinstance(error, kind)))
    except expected as error:
        return fail(prog, str(error), expected_exit_code)


def fail(prog: str, message: str, exit_code: int) -> int:
    """Print ``<prog>: error: <message>`` (one line) to stderr and return ``exit_code``."""
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr, flush=True)
    return exit_code


def warn(prog: str, message: str) -> None:
    """One line on stderr that is not an error: something was left out, and why."""
    print(f"{prog}: {one_line(message)}", file=sys.stderr, flush=True)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser, except that an error is one line: ``<prog>: error: <message>`` (exit 2).
    Its sub-command parsers (``add_subparsers``) are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {one_line(message)}\n")


def positive_int(text: str) -> int:
    value = _number(int, text, "a whole number")
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, not {text}")
    return value


def positive_float(text: str) -> float:
    value = _number(float, text, "a number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(float, text, "a number")
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, not {text}")
    return value


def fraction(text: str) -> float:
    value = _number(float, text, "a number")
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be a fraction between 0 and 1, not {text}")
    return value


def readable_file(text: str) -> Path:
    """An existing file this process may read (checked by opening it), so a command fails on a wrong
    path before it starts anything."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {error.strerror or type(error).__name__}") from None
    return path


def _number(kind: type, text: str, what: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}") from None

