"""Run the live dashboard: ``python -m sinks.dashboard [--host H] [--port P]``.

Defaults come from ``FRAUD_DASHBOARD_HOST`` (127.0.0.1) and ``FRAUD_DASHBOARD_PORT`` (8765); the
Redis URL and key namespace from the settings (``FRAUD_REDIS_URL``, ``FRAUD_SINKS_NAMESPACE``).
"""

from __future__ import annotations

import logging
import sys

from aiohttp import web

from common.cli_errors import UNAVAILABLE, ArgumentParser, UserError, run_command
from common.settings import get_settings
from sinks.dashboard.app import make_web_app
from sinks.dashboard.hosts import allowed_names
from sinks.dashboard.verdicts import KafkaVerdicts
from sinks.faust_support import redis_client
from common.redis_keys import RedisKeys


def main(argv: list[str] | None = None) -> None:
    settings = get_settings()
    parser = ArgumentParser(prog="python -m sinks.dashboard",
                            description="Live fraud dashboard (cases, alert rates, latency).")
    parser.add_argument("--host", default=settings.dashboard_host,
                        help="address to bind (FRAUD_DASHBOARD_HOST, default %(default)s)")
    parser.add_argument("--port", type=int, default=settings.dashboard_port,
                        help="port (FRAUD_DASHBOARD_PORT, default %(default)s)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    hosts = allowed_names(args.host, settings.dashboard_allowed_hosts)
    app = make_web_app(redis_client(settings), RedisKeys(settings.sinks_namespace), hosts, KafkaVerdicts(settings))
    print(f"dashboard on http://{args.host}:{args.port}/", flush=True)
    try:
        web.run_app(app, host=args.host, port=args.port, print=None)
    except OSError as error:                 # the port is taken, or the address is not this host's
        raise UserError(f"cannot listen on {args.host}:{args.port}: {error.strerror or error} "
                        f"(FRAUD_DASHBOARD_HOST, FRAUD_DASHBOARD_PORT)", UNAVAILABLE) from None


if __name__ == "__main__":
    sys.exit(run_command(main, "python -m sinks.dashboard"))
