"""Debian's Chromium for the tests that check the dashboard in a real browser (tests/dashboard_dom.py):
``python -m deploy browser``, run by ``make test`` before the tests. Without it those checks are skipped,
each saying so."""

from __future__ import annotations

from pathlib import Path

from deploy.debian import NotInstallable, apt_install

CHROMIUM = Path("/usr/bin/chromium")     # where Debian's package puts it, and where the tests look


def ensure_chromium(say=print) -> bool:
    """True when ``CHROMIUM`` is there, installed from Debian's packages first if it is missing (as root);
    otherwise one line on why not, and False."""
    if CHROMIUM.exists():
        return True
    say("installing Debian's chromium for the dashboard's browser checks (once; a minute or two) ...")
    try:
        apt_install("chromium")
    except NotInstallable as error:
        say(f"{CHROMIUM} is absent: {error}; the dashboard's browser checks will be skipped")
        return False
    return CHROMIUM.exists()
