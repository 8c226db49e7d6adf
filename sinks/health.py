"""A Faust worker's health, for a container's health check (deploy/docker-compose.yml): its consumer
group (the app id) is stable and this host is one of its members, i.e. the worker is consuming.

    python -m sinks.health enricher|cases

Exit 0 healthy, 1 not, with one line saying why.
"""

from __future__ import annotations

import socket
import sys

from common.settings import Settings, get_settings


def group_of(service: str, settings: Settings) -> str:
    return {"enricher": settings.enricher_app_id, "cases": settings.cases_app_id}[service]


def own_addresses() -> set[str]:
    """This host's addresses, as the broker sees a container's client (its address on the network)."""
    name = socket.gethostname()
    return {name, *socket.gethostbyname_ex(name)[2]}


def consuming(group: dict, addresses: set[str]) -> str | None:
    """Why a described group does not show this host consuming (None: it does)."""
    if group.get("group_state") != "Stable":
        return f"group {group.get('group_id')} is {group.get('group_state') or 'unknown'}, not Stable"
    hosts = {member.get("client_host", "").lstrip("/") for member in group.get("members", [])}
    if not hosts & addresses:
        return f"this host ({', '.join(sorted(addresses))}) is not among the members of {group.get('group_id')}: {sorted(hosts)}"
    return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in {"enricher", "cases"}:
        print("usage: python -m sinks.health enricher|cases", file=sys.stderr)
        return 2
    from kafka import KafkaAdminClient

    from common.kafka_clients import kafka_python_config

    settings = get_settings()
    group_id = group_of(args[0], settings)
    admin = KafkaAdminClient(**kafka_python_config(settings), request_timeout_ms=10_000)
    try:
        group = admin.describe_groups([group_id])[group_id]
    finally:
        admin.close()
    problem = consuming(group, own_addresses())
    print(problem or f"{args[0]}: consuming as a member of {group_id}")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
