"""Debian's Chromium for the tests that check the dashboard in a real browser (tests/dashboard_dom.py):
``python -m deploy browser``, run by ``make test`` before the tests. Without it those checks are skipped,
each saying so."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")     # where Debian's package puts it, and where the tests look


def ensure_chromium(say=print) -> bool:
    """True when ``CHROMIUM`` is there, installed from Debian's packages first if it is missing and this is
    root on a machine with apt-get; otherwise one line on what to do, and False."""
    if CHROMIUM.exists():
        return True
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        say(f"{CHROMIUM} is absent: the dashboard's browser checks will be skipped "
            "(Debian: sudo apt-get install chromium)")
        return False
    say("installing Debian's chromium for the dashboard's browser checks (once; a minute or two) ...")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "--no-install-recommends", "chromium"]):
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            say(f"installing chromium failed ({' '.join(cmd[1:3])}): {result.stderr.strip()[-300:]}; "
                "the dashboard's browser checks will be skipped")
            return False
    return CHROMIUM.exists()
