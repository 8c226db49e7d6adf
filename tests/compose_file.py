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


def declared_services(environ: dict[str, str] | None = None) -> dict[str, dict]:
    """{service: {"image", "command", "environment"}} of the services a plain ``up`` starts (no profile),
    the file read with ``environ``'s values of its variables. A string command is split as compose does."""
    import yaml

    services = interpolate(yaml.safe_load(COMPOSE_FILE.read_text()), environ)["services"]
    declared = {}
    for name, service in services.items():
        if service.get("profiles"):
            continue
        command = service.get("command")
        env = service.get("environment") or {}
        declared[name] = {"image": service["image"],
                          "command": shlex.split(command) if isinstance(command, str) else command,
                          "environment": {k: str(v) for k, v in env.items()}}
    return declared
