"""Which ``Host`` headers the dashboard answers: its defence against DNS rebinding.

A web page on another site can make its own name resolve to 127.0.0.1 and then read the dashboard
from the visitor's browser as if it were that site; the browser still sends the other site's name in
``Host``. So the dashboard answers only requests naming it by a loopback name (127.0.0.1, localhost,
::1, on any port), the address it is bound to, or a name ``FRAUD_DASHBOARD_ALLOWED_HOSTS`` adds (a
reverse proxy's public name, say); anything else gets 403 and one line saying which setting to change.
Names are compared without the port, as Django's ALLOWED_HOSTS does.
"""

from __future__ import annotations

from typing import Iterable

from aiohttp import web

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARD_ADDRESSES = {"0.0.0.0", "::", ""}


def allowed_names(bind_host: str, extra: str = "") -> frozenset[str]:
    """The loopback names, ``bind_host`` unless it is a wildcard address, and the comma-separated
    names of ``extra`` (``FRAUD_DASHBOARD_ALLOWED_HOSTS``)."""
    names = [*LOOPBACK_NAMES, *(n for n in extra.split(",") if n.strip())]
    if bind_host not in WILDCARD_ADDRESSES:
        names.append(bind_host)
    return frozenset(_normal(n) for n in names)


def host_name(header: str | None) -> str | None:
    """The name of a ``Host`` header without its port (``[::1]:8765`` -> ``::1``); None if malformed."""
    if not header:
        return None
    header = header.strip()
    if header.startswith("["):                       # an IPv6 literal: [addr] or [addr]:port
        end = header.find("]")
        if end < 0 or (header[end + 1:] and not header[end + 1:].startswith(":")):
            return None
        return _normal(header[1:end])
    name, _, port = header.partition(":")
    if port and not port.isdigit():
        return None
    return _normal(name) or None


def _normal(name: str) -> str:
    return name.strip().strip("[]").rstrip(".").lower()


def host_check(names: Iterable[str]):
    """An aiohttp middleware refusing requests whose ``Host`` is not one of ``names``."""
    allowed = frozenset(_normal(n) for n in names)

    @web.middleware
    async def check(request: web.Request, handler):
        name = host_name(request.headers.get("Host"))
        if name not in allowed:
            shown = (request.headers.get("Host") or "")[:80]
            raise web.HTTPForbidden(text=f"host {shown!r} is not served here: the dashboard answers "
                                         f"{', '.join(sorted(allowed))} (add names with "
                                         f"FRAUD_DASHBOARD_ALLOWED_HOSTS)\n")
        return await handler(request)

    return check
