"""tests/compose_file.py: deploy/docker-compose.yml as declared, and how running containers differ from
it (the end-to-end suite's check that the compose stack it ran is the file users get)."""

from __future__ import annotations

import copy

import pytest

from tests.compose_file import declared_services, differences, env_file, variables

pytestmark = pytest.mark.unit


def _containers_as_declared(declared: dict[str, dict]) -> list[dict]:
    """What ``docker inspect`` shows of a stack started from ``declared`` (plus one variable of the image)."""
    return [{"Config": {"Labels": {"com.docker.compose.service": name}, "Image": spec["image"],
                        "Cmd": spec["command"], "Env": [f"{k}={v}" for k, v in spec["environment"].items()]
                        + ["PATH=/usr/bin"]}} for name, spec in declared.items()]


def test_the_declared_services_are_those_a_plain_up_starts_with_their_defaults():
    declared = declared_services()
    assert set(declared) == {"kafka", "redis", "topics", "train", "detectors", "enricher", "cases", "dashboard"}
    assert declared["kafka"]["image"] == "apache/kafka:4.1.1"
    assert declared["detectors"]["command"] == ["python", "-m", "detectors", "run"]
    local = declared_services(env_file())
    assert local["kafka"]["image"] == "fraud-local/kafka:4.1.1"
    assert {"KAFKA_IMAGE", "PYTHON_IMAGE", "DETECTORS"} <= variables()


def test_a_stack_that_differs_from_the_file_in_any_way_is_told():
    declared = declared_services()
    image_env = {spec["image"]: ["PATH=/usr/bin"] for spec in declared.values()}
    same = _containers_as_declared(declared)
    assert differences(declared, same, image_env) == []

    def changed(edit) -> list[str]:
        containers = copy.deepcopy(same)
        edit({c["Config"]["Labels"]["com.docker.compose.service"]: c["Config"] for c in containers}, containers)
        return differences(declared, containers, image_env)

    assert "services" in changed(lambda by, all_: all_.pop())[0]
    assert "command" in changed(lambda by, _: by["detectors"].update(Cmd=["python", "-m", "detectors", "run",
                                                                           "velocity"]))[0]
    assert "other values" in changed(lambda by, _: by["enricher"]["Env"].__setitem__(
        0, "FRAUD_KAFKA_BOOTSTRAP=elsewhere:9092"))[0]
    assert "neither declared" in changed(lambda by, _: by["cases"]["Env"].append("FRAUD_CASES_APP_ID=other"))[0]
    assert "image" in changed(lambda by, _: by["redis"].update(Image="redis:latest"))[0]
