"""The compose target only (``make e2e-compose``): the stack the suite ran is the one
deploy/docker-compose.yml declares, it went through its faults, and the dashboard answers through the
published port in a browser. The diamond's own checks (tests/e2e/test_diamond.py) run on the same run."""

from __future__ import annotations

import os

import pytest

from tests.compose_file import declared_services, differences, env_file, variables

pytestmark = pytest.mark.timeout(1500)


@pytest.fixture
def compose_run(e2e_target, request):
    if e2e_target != "compose":
        pytest.skip("the containers belong to the compose target")
    return request.getfixturevalue("diamond_run")


def _declared(run) -> dict[str, dict]:
    """The file read with the variables the stack was started with: the shell's, else those of
    local-images.env when the locally built images were chosen (compose: the shell wins)."""
    environ = env_file() if run.compose["image_choice"] == "local" else {}
    environ.update({name: os.environ[name] for name in variables() if name in os.environ})
    return declared_services(environ, set(run.compose["active_services"]))


def test_the_stack_ran_exactly_the_services_commands_and_environment_the_compose_file_declares(compose_run):
    found = differences(_declared(compose_run), compose_run.compose["containers"], compose_run.compose["image_env"])
    assert not found, "the stack the suite ran is not deploy/docker-compose.yml:\n" + "\n".join(found)


def test_the_detector_container_was_killed_and_the_broker_restarted(compose_run):
    """The exactly-once and no-loss checks of test_diamond.py held across these."""
    assert compose_run.compose["faults"] == ["kill detectors", "restart kafka"]


def test_the_dashboard_answers_through_the_published_port_in_a_browser(compose_run, tmp_path):
    from demo.diamond import dashboard_url
    from tests.dashboard_dom import CHROMIUM, NO_CHROMIUM, dump_dom, live_figures

    if not CHROMIUM.exists():
        pytest.skip(NO_CHROMIUM)
    url = dashboard_url(compose_run.settings)
    assert url.startswith("http://127.0.0.1:"), url
    shown = live_figures(dump_dom(url, tmp_path / "chromium"))
    assert shown["status"].startswith("updated"), shown["status"]
    detectors_with_alerts = {a["detector"] for a in compose_run.alerts}
    assert detectors_with_alerts <= set(shown["detectors"]), shown["detectors"]
    assert shown["case_rows"] > 0, shown
