"""No password of the secure local stack reaches a process's command line, where ``ps`` and every
local user can read it: every command the stack runs is recorded as it is started (keytool, the
storage format, the broker, Redis), and the live processes' ``/proc/<pid>/cmdline`` is read too."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

from deploy.local_stack import KafkaBroker, RedisServer, free_ports


def passwords_in(value, key: str = "") -> list[str]:
    """Every string under a key naming a password, at any depth of a secrets.json."""
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in passwords_in(v, k if "password" in k else key)]
    return [value] if isinstance(value, str) and "password" in key else []


def process_tree(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    kids = [int(c) for c in children.read_text().split()] if children.exists() else []
    return [pid, *(p for kid in kids for p in process_tree(kid))]


def test_no_password_of_the_secure_stack_is_on_a_command_line(settings, tmp_path, monkeypatch):
    started: list[list[str]] = []
    real_popen = subprocess.Popen

    class RecordingPopen(real_popen):
        def __init__(self, args, *rest, **kwargs):
            started.append([str(a) for a in ([args] if isinstance(args, (str, bytes)) else args)])
            super().__init__(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", RecordingPopen)
    port = free_ports(29292, 29392, width=2)
    redis_port = free_ports(26500, 26600)
    stack = settings.replace(kafka_bootstrap=f"127.0.0.1:{port}", local_kafka_controller_port=port + 1,
                             redis_url=f"redis://127.0.0.1:{redis_port}/0", redis_password=secrets.token_urlsafe(18),
                             run_dir=tmp_path / "run", local_kafka_heap="512m")
    broker, redis_server = KafkaBroker(stack, secure=True), RedisServer(stack)
    command_lines: list[str] = []
    try:
        redis_server.up()
        for _start in ("first", "restart on the same data and secrets"):
            broker.up()
            live = [p for service in (broker, redis_server) for p in process_tree(service.pid())]
            command_lines += [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                              for pid in live]
            broker.stop()
    finally:
        broker.stop()
        redis_server.stop()

    kept = json.loads((broker.security_dir / "secrets.json").read_text())
    passwords = [*passwords_in(kept), stack.redis_password]
    assert len(passwords) >= 4 and all(len(p) >= 20 for p in passwords)
    programs = {Path(cmd[0]).name for cmd in started}
    assert {"keytool", "java", "redis-server"} <= programs, programs      # what the stack runs
    assert sum("kafka.Kafka" in " ".join(cmd) for cmd in started) == 2
    for line in [" ".join(cmd) for cmd in started] + command_lines:
        leaked = [i for i, password in enumerate(passwords) if password in line]
        assert not leaked, f"password(s) {leaked} on the command line {line[:120]}..."
    # the argument file that carried the users to the storage format is gone
    assert not list((stack.run_dir / "kafka").glob("*.args"))
