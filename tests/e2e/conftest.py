"""One run of the whole diamond per session, on the target ``FRAUD_E2E_TARGET`` names.

``local`` (the default, ``make e2e``): the embedded local stack, services started by the suite.
``compose`` (``make e2e-compose``): the containers of ``make compose-up``, reached through the host
ports. Every test of this folder asserts one aspect of the same run (``diamond_run``).
"""

from __future__ import annotations

import os
from datetime import datetime

import pytest

TARGETS = ("local", "compose")


def _say(message: str) -> None:
    print(f"[e2e {datetime.now().strftime('%H:%M:%S')}] {message}", flush=True)


@pytest.fixture(scope="session")
def e2e_target() -> str:
    target = os.environ.get("FRAUD_E2E_TARGET", "local")
    if target not in TARGETS:
        pytest.fail(f"FRAUD_E2E_TARGET={target!r}: choose one of {', '.join(TARGETS)}", pytrace=False)
    return target


@pytest.fixture(scope="session")
def diamond_run(e2e_target, settings, tmp_path_factory, request):
    from tests.e2e.targets import run_compose, run_local

    out = tmp_path_factory.mktemp("e2e")
    if e2e_target == "local":
        run = run_local(request.getfixturevalue("stack"), out, _say)
    else:
        run = run_compose(settings, out, _say)
    _say(f"{e2e_target} run done; seconds per phase: " +
         ", ".join(f"{name} {seconds:.0f}" for name, seconds in run.timings.items()))
    return run


@pytest.fixture
def local_run(e2e_target, request):
    if e2e_target != "local":
        pytest.skip("the demo's report and process cleanup belong to the local target")
    return request.getfixturevalue("diamond_run")
