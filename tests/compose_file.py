"""deploy/docker-compose.yml as declared: compose's ``${VAR:-default}`` interpolation and the services a
plain ``up`` starts, with their image, command and environment. Shared by the static checks
(tests/unit/test_deploy_files.py) and the end-to-end check that the compose stack ran exactly this."""

from __future__ import annotations

import re
import shlex

from common.settings import REPO_ROOT

COMPOSE_FILE = REPO_ROOT / "deploy" / "docker-compose.yml"
LOCAL_IMAGES_ENV = REPO_ROOT / "deploy" / "docker" / "local-images.env"
INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([^}]*))?\}")


def interpolate(value, environ: dict[str, str] | None = None):
    """Compose's ``${VAR}`` / ``${VAR:-default}`` substitution, with the defaults (no host values)."""
    environ = environ or {}
    if isinstance(value, str):
        def sub(match):
            name, op, arg = match.group(1), match.group(2), match.group(3)
            if name in environ and (environ[name] or op != ":-"):
                return environ[name]
            return arg if op in {":-", "-"} else ""
        return INTERPOLATION.sub(sub, value)
    if isinstance(value, list):
        return [interpolate(v, environ) for v in value]
    if isinstance(value, dict):
        return {k: interpolate(v, environ) for k, v in value.items()}
    return value


def variables() -> set[str]:
    """The variables the compose file reads."""
    return {m.group(1) for m in INTERPOLATION.finditer(COMPOSE_FILE.read_text())}


def env_file(path=LOCAL_IMAGES_ENV) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def declared_services(environ: dict[str, str] | None = None, active: set[str] | None = None) -> dict[str, dict]:
    """{service: {"image", "command", "environment"}} of the services a plain ``up`` starts (no profile),
    or of the ``active`` ones (what ``config --services`` lists with the profiles a run enabled), the file
    read with ``environ``'s values of its variables. A string command is split as compose does."""
    import yaml

    services = interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), environ)["services"]
    declared = {}
    for name, service in services.items():
        if (name not in active) if active is not None else service.get("profiles"):
            continue
        command = service.get("command")
        env = service.get("environment") or {}
        declared[name] = {"image": service["image"],
                          "command": shlex.split(command) if isinstance(command, str) else command,
                          "environment": {k: str(v) for k, v in env.items()}}
    return declared


def differences(declared: dict[str, dict], containers: list[dict], image_env: dict[str, list[str]]) -> list[str]:
    """How containers (``docker inspect``) differ from ``declared`` (``declared_services``): another
    service list, image, command, declared variable, or a variable neither declared nor the image's."""
    found: list[str] = []
    ran: dict[str, dict] = {}
    for container in containers:
        service = container["Config"]["Labels"]["com.docker.compose.service"]
        if service in ran:
            found.append(f"two containers of {service}")
        ran[service] = container
    if set(ran) != set(declared):
        found.append(f"services: ran {sorted(ran)}, declared {sorted(declared)}")
    for service in sorted(set(ran) & set(declared)):
        want, config = declared[service], ran[service]["Config"]
        if config["Image"] != want["image"]:
            found.append(f"{service}: image {config['Image']}, declared {want['image']}")
        if want["command"] is not None and config["Cmd"] != want["command"]:
            found.append(f"{service}: command {config['Cmd']}, declared {want['command']}")
        env = dict(item.split("=", 1) for item in config["Env"] or [])
        baked = dict(item.split("=", 1) for item in image_env.get(config["Image"], []))
        wrong = sorted(k for k, v in want["environment"].items() if env.get(k) != v)
        extra = sorted(k for k, v in env.items() if k not in want["environment"] and baked.get(k) != v)
        if wrong:
            found.append(f"{service}: other values of {wrong} than declared")
        if extra:
            found.append(f"{service}: variables neither declared nor the image's: {extra}")
    return found
