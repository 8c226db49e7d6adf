"""Files only their owner can read: passwords and credentials of the local stack."""

from __future__ import annotations

import os
from pathlib import Path


def write_private(path: Path, text: str) -> Path:
    """Write ``text`` to a file only its owner can read (it holds a password)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path
