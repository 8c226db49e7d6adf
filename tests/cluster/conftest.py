"""The local cluster (``deploy/cluster.py``) for the tests of this folder, started once per session with
the commands docs/cluster.md gives (``python -m deploy cluster-up``, ``cluster-status``, ``cluster-env``) if it is not
running, and then stopped (``cluster-down``) and its folder deleted at the end (all but the executors' Python
environment, a cache), also on failure. These tests take many minutes on two cores and run only with
FRAUD_CLUSTER_TESTS=1 (``make e2e-cluster``), never in ``make test``."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from datetime import datetime

import pytest

from common.settings import REPO_ROOT, Settings


def say(message: str) -> None:
    print(f"[cluster {datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


def deploy_command(*args: str, timeout: float = 600) -> str:
    """``python -m deploy ARGS`` as a user runs it; its output (an error with the output when it fails)."""
    result = subprocess.run([sys.executable, "-m", "deploy", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"python -m deploy {' '.join(args)} failed ({result.returncode}):\n"
                           f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return result.stdout


def exported(line: str) -> dict[str, str]:
    """The variables of ``export A=1 B=2`` (what ``python -m deploy cluster-env`` prints)."""
    words = shlex.split(line.strip())
    assert words[0] == "export", line
    return dict(word.split("=", 1) for word in words[1:])


@pytest.fixture(scope="session")
def local_cluster(settings):
    """The settings of the cluster's clients: ``settings`` with ``eval "$(python -m deploy cluster-env)"``."""
    from deploy import cluster

    ready = cluster.live_brokers(settings) == 3 and len(cluster.alive_workers(settings)) >= 2
    try:
        if not ready:
            say("$ python -m deploy cluster-up")
            say(deploy_command("cluster-up").rstrip())
        status = deploy_command("cluster-status")
        say("$ python -m deploy cluster-status\n" + status.rstrip())
        assert status.count(" ready ") == 3, status         # brokers, master, workers
        env = exported(deploy_command("cluster-env"))
        shown = subprocess.run([sys.executable, "-m", "deploy", "settings"], cwd=REPO_ROOT, capture_output=True,
                               text=True, timeout=60, env={**os.environ, **env}, check=True).stdout
        say("$ eval \"$(python -m deploy cluster-env)\"; make settings\n" + shown.rstrip())
        assert shown.startswith("profile in force: cluster"), shown.splitlines()[0]
        yield Settings.from_env(environ={**settings.to_env(), **env})
    finally:
        if not ready and os.environ.get("FRAUD_KEEP_STACK") != "1":
            deploy_command("cluster-down")
            # All but the executors' Python environment, a cache cluster-up reuses (deploy/executor_env.py).
            for path in settings.cluster_dir.glob("*"):
                if path.name != "executor-env":
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            say("cluster stopped (python -m deploy cluster-down) and its folder deleted but the executors' env")
