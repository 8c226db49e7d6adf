"""deploy/docker-compose.yml loaded by Docker Compose's own loader, compose-go (the library inside
`docker compose` v2): YAML, the compose specification's JSON schema, interpolation, profiles and the
consistency checks (unknown services in depends_on, undeclared volumes, ...). No Docker engine is
needed, only the Go toolchain: tests/tools/composecheck is a 40-line program pinned by its go.mod and
go.sum; its modules come from the Go module proxy on the first run (about 40 s to build, cached after).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from common.settings import REPO_ROOT

COMPOSE_FILE = REPO_ROOT / "deploy" / "docker-compose.yml"
TOOL = REPO_ROOT / "tests" / "tools" / "composecheck"


@pytest.fixture(scope="module")
def composecheck(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.skip("the Go toolchain is needed to build tests/tools/composecheck (compose-go)")
    binary = tmp_path_factory.mktemp("composecheck") / "composecheck"
    result = subprocess.run([go, "build", "-mod=readonly", "-o", str(binary), "."], cwd=TOOL,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"building composecheck failed:\n{result.stderr[-2000:]}"

    def run(path, *profiles: str, env: dict[str, str] | None = None):
        args = [str(binary)] + [f"-profile={p}" for p in profiles] + [str(path)]
        # The host's FRAUD_*/port variables must not change what is validated.
        clean = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME"}}
        return subprocess.run(args, capture_output=True, text=True, env={**clean, **(env or {})},
                              cwd=REPO_ROOT, timeout=60)
    return run


@pytest.mark.parametrize("profiles", [(), ("demo",)])
def test_compose_file_is_valid_for_docker_compose(composecheck, profiles):
    result = composecheck(COMPOSE_FILE, *profiles)
    assert result.returncode == 0, result.stderr
    project = json.loads(result.stdout)
    expected = {"kafka", "redis", "topics", "train", "detectors", "enricher", "cases", "dashboard"}
    if profiles:
        expected |= {"reference", "producer"}
    assert set(project["services"]) == expected
    assert project["name"] == "fraud-detection"
    # The loader's own view of the merged anchors and the interpolation defaults.
    detectors = project["services"]["detectors"]
    assert detectors["environment"]["FRAUD_KAFKA_BOOTSTRAP"] == "kafka:9092"
    assert detectors["build"]["target"] == "app"
    assert detectors["depends_on"]["topics"]["condition"] == "service_completed_successfully"
    assert detectors["depends_on"]["train"]["condition"] == "service_completed_successfully"
    assert detectors["healthcheck"]["test"] == ["CMD-SHELL", "python -m spark_job.health "]
    assert detectors["build"]["args"]["PYTHON_IMAGE"] == "python:3.11.13-slim-bookworm"
    assert project["services"]["kafka"]["image"] == "apache/kafka:4.1.1"
    ports = project["services"]["dashboard"]["ports"]
    assert ports == [{"mode": "ingress", "host_ip": "127.0.0.1", "target": 8765,
                      "published": "18765", "protocol": "tcp"}]


def test_the_cluster_profile_adds_three_brokers_a_spark_master_two_workers_and_the_job(composecheck):
    result = composecheck(COMPOSE_FILE, "cluster")
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    cluster = {"kafka-1", "kafka-2", "kafka-3", "cluster-topics", "spark-master", "spark-worker-1", "spark-worker-2",
               "detectors-cluster"}
    assert cluster <= set(services)
    for n in (1, 2, 3):
        env = services[f"kafka-{n}"]["environment"]
        assert (env["KAFKA_NODE_ID"], env["KAFKA_MIN_INSYNC_REPLICAS"], env["KAFKA_DEFAULT_REPLICATION_FACTOR"]) == \
            (str(n), "2", "3")
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "3"
    worker = services["spark-worker-2"]
    # compose's $$ is a literal $: the shell finds pyspark's spark-class at start
    assert worker["command"][-1].startswith('exec "$(python -c ')
    assert worker["depends_on"]["spark-master"]["condition"] == "service_healthy"
    job = services["detectors-cluster"]
    assert job["environment"]["FRAUD_SPARK_MASTER"] == "spark://spark-master:7077"
    assert job["depends_on"]["cluster-topics"]["condition"] == "service_completed_successfully"
    # Only the brokers publish a port (their EXTERNAL listener, for host-side clients), on 127.0.0.1.
    published = {name: [(p["host_ip"], p["published"]) for p in services[name].get("ports") or []] for name in cluster}
    assert published == {name: [("127.0.0.1", str(29191 + int(name[-1])))] if name.startswith("kafka-") else []
                         for name in cluster}


@pytest.mark.parametrize("profile, monitoring", [("monitoring", {"prometheus", "grafana"}), ("prometheus", {"prometheus"})])
def test_the_monitoring_profile_adds_prometheus_and_grafana_with_their_files(composecheck, profile, monitoring):
    """``monitoring``: Prometheus and Grafana; ``prometheus``: Prometheus alone, what compose.sh runs where
    Grafana's image cannot be had."""
    result = composecheck(COMPOSE_FILE, profile)
    assert result.returncode == 0, result.stderr
    project = json.loads(result.stdout)
    assert set(project["services"]) == {"kafka", "redis", "topics", "train", "detectors", "enricher", "cases",
                                        "dashboard"} | monitoring
    prometheus = project["services"]["prometheus"]
    assert prometheus["ports"][0]["host_ip"] == "127.0.0.1" and prometheus["ports"][0]["published"] == "19090"
    files = {name: config["file"] for name, config in project["configs"].items()}
    assert files["prometheus-config"] == str(REPO_ROOT / "deploy" / "monitoring" / "prometheus.yml")
    assert all(os.path.exists(path) for path in files.values()), files
    assert project["services"]["detectors"]["environment"]["FRAUD_METRICS_HOST"] == "0.0.0.0"


def test_the_local_images_env_file_replaces_every_image(composecheck):
    from tests.compose_file import LOCAL_IMAGES_ENV, env_file

    local = env_file(LOCAL_IMAGES_ENV)
    result = composecheck(COMPOSE_FILE, env=local)
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    assert services["kafka"]["image"] == local["KAFKA_IMAGE"]
    assert services["redis"]["image"] == local["REDIS_IMAGE"]
    with_prometheus = json.loads(composecheck(COMPOSE_FILE, "prometheus", env=local).stdout)["services"]
    assert with_prometheus["prometheus"]["image"] == local["PROMETHEUS_IMAGE"]
    for name in ("topics", "train", "detectors", "enricher", "cases", "dashboard"):
        assert services[name]["build"]["args"] == {k: local[k] for k in ("PYTHON_IMAGE", "JRE_IMAGE", "MAVEN_IMAGE")}


def test_overridable_variables_reach_the_right_places(composecheck):
    result = composecheck(COMPOSE_FILE, "demo", env={"KAFKA_HOST_PORT": "39092", "DEMO_RATE": "5"})
    assert result.returncode == 0, result.stderr
    services = json.loads(result.stdout)["services"]
    assert "EXTERNAL://127.0.0.1:39092" in services["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert services["kafka"]["ports"][0]["published"] == "39092"
    command = services["producer"]["command"]
    assert command[command.index("--rate") + 1] == "5"


@pytest.mark.parametrize("breakage, message", [
    (("condition: service_healthy", "condition: service_hapy"), "condition"),
    (("    hostname: kafka", "    hostnme: kafka"), "hostnme"),
    (("      - kafka-data:/var/lib/kafka/data", "      - kafka-dta:/var/lib/kafka/data"), "kafka-dta"),
    (("    <<: *app\n    command: [\"python\", \"-m\", \"sinks.enricher\"",
      "    <<: *app\n    depends_on: [zookeeper]\n    command: [\"python\", \"-m\", \"sinks.enricher\""), "zookeeper"),
])
def test_validator_rejects_a_broken_compose_file(composecheck, tmp_path, breakage, message):
    old, new = breakage
    text = COMPOSE_FILE.read_text()
    assert old in text
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(text.replace(old, new, 1))
    result = composecheck(broken)
    assert result.returncode != 0, f"the validator accepted a file with {new!r}"
    assert message in result.stderr, result.stderr
