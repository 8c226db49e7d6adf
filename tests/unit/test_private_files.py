"""Files holding passwords are owner-only from their first byte, not made so afterwards: a reader
between the write and a chmod (or a crash before it) must find nothing to read."""

import os
import stat
from pathlib import Path

import deploy.broker_security
from common.settings import Settings
from deploy.local_stack import KafkaBroker
from deploy.private_files import write_private


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_private_file_is_owner_only_under_a_permissive_umask(tmp_path):
    old = os.umask(0)
    try:
        path = write_private(tmp_path / "secret.conf", "password=x\n")
    finally:
        os.umask(old)
    assert _mode(path) == 0o600


def test_the_secure_brokers_properties_are_never_readable_by_others(tmp_path, monkeypatch):
    broker = KafkaBroker(Settings.from_env(environ={}).replace(run_dir=tmp_path), secure=True)
    monkeypatch.setattr(KafkaBroker, "secrets", lambda self: None)
    monkeypatch.setattr(deploy.broker_security, "server_properties", lambda made, name: "ssl.keystore.password=x\n")
    monkeypatch.setattr(Path, "chmod", lambda self, mode: None)     # no second step to make it private
    old = os.umask(0o022)
    try:
        broker.render_config()
    finally:
        os.umask(old)
    assert "ssl.keystore.password=x" in broker.config_file.read_text()
    assert _mode(broker.config_file) == 0o600
