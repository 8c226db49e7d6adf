"""Debian packages the project installs itself when they are missing (redis-server, chromium): as root,
with apt-get."""

from __future__ import annotations

import os
import shutil
import subprocess


class NotInstallable(RuntimeError):
    """A package could not be installed here; the message says why in one line."""


def apt_install(package: str) -> None:
    """``apt-get update``, then ``apt-get install --no-install-recommends package``; ``NotInstallable`` when
    this is not root on a machine with apt-get, or a step fails."""
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise NotInstallable(f"{package} can only be installed automatically as root with apt-get "
                             f"(Debian: sudo apt-get install {package})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "--no-install-recommends", package]):
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise NotInstallable(f"installing {package} failed ({' '.join(cmd[1:3])}): {result.stderr.strip()[-400:]}")
