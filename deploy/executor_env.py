"""The executors' Python environment: a packed virtualenv of the project's runtime dependencies, without
the project, for ``spark-submit --archives <archive>#environment`` (Spark's "Python Package Management").

Each executor unpacks the archive into its working folder as ``./environment`` and runs
``./environment/bin/python`` (``spark.pyspark.python``); the project's own code reaches it only as the
``--py-files`` zip, so code or files that exist only on the driver fail on a cluster here too. The
venv's interpreter is a symlink to the base Python it was made from (``pyvenv.cfg``'s ``home``), which
every node must have at the same path: one base image for the whole cluster, as on a real one.

Built once under ``FRAUD_CLUSTER_DIR/executor-env/``, named by a digest of what went into it (the
dependencies, the driver venv's versions of them, the Python version): a new dependency list builds a
new archive, the same list reuses the one there.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

from common.settings import REPO_ROOT, Settings
from deploy.local_stack import StackError

ENV_DIR_NAME = "environment"           # the folder executors unpack it to: the archive's '#' fragment
EXECUTOR_PYTHON = f"./{ENV_DIR_NAME}/bin/python"
# pyspark (and its py4j) comes from the Spark installation on each worker: the executor puts its
# python/lib/pyspark.zip and py4j zip on the Python workers' PYTHONPATH (PythonUtils.sparkPythonPath).
FROM_SPARK = frozenset({"pyspark", "py4j"})


def _name(requirement: str) -> str:
    """The normalised project name of a requirement line (``scikit-learn==1.9.1`` -> ``scikit-learn``)."""
    for sep in ("==", ">=", "<=", "~=", "!=", ">", "<", "[", ";", " ", "@"):
        requirement = requirement.split(sep, 1)[0]
    return requirement.strip().lower().replace("_", "-").replace(".", "-")


def runtime_requirements(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """The project's declared runtime dependencies that executors install (not those Spark provides)."""
    declared = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [req for req in declared if _name(req) not in FROM_SPARK]


def pinned_versions(python: str = sys.executable) -> list[str]:
    """The driver venv's exact versions (``pip freeze``, the project itself left out): constraints, so the
    executors unpickle what the driver pickled with the same library versions."""
    frozen = subprocess.run([python, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    project = _name(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["name"])
    return sorted(line for line in frozen
                  if "==" in line and _name(line) not in FROM_SPARK | {project})


def digest(requirements: list[str], constraints: list[str]) -> str:
    text = "\n".join([sys.version, *requirements, "--", *constraints])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def archive_path(settings: Settings, requirements: list[str], constraints: list[str]) -> Path:
    return settings.cluster_dir / "executor-env" / f"executor-env-{digest(requirements, constraints)}.tar.gz"


def _run(cmd: list[str], what: str, cwd: Path) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if result.returncode != 0:
        raise StackError(f"{what} failed ({result.returncode}): {' '.join(cmd)}\n"
                         f"{result.stdout[-1500:]}\n{result.stderr[-1500:]}")


def _check(env: Path) -> None:
    """The env imports the dependencies and not the project (run from a folder outside the repo)."""
    probe = ("import importlib.util, sys; import numpy, pandas, pyarrow, sklearn; "
             "found = [p for p in ('common', 'detectors', 'spark_job', 'pyspark') if importlib.util.find_spec(p)]; "
             "sys.exit('the executors\\' env must not contain ' + ', '.join(found) if found else 0)")
    _run([str(env / "bin" / "python"), "-I", "-c", probe], "checking the executors' environment", cwd=env)


def build(settings: Settings, log=print) -> Path:
    """The archive of the executors' environment, built if it is not there yet."""
    requirements, constraints = runtime_requirements(), pinned_versions()
    out = archive_path(settings, requirements, constraints)
    if out.exists():
        log(f"executors' Python environment: {out} ({out.stat().st_size / 1e6:.0f} MB, cached)")
        return out
    log(f"building the executors' Python environment (the project's {len(requirements)} runtime dependencies "
        f"without pyspark and without the project, the driver venv's versions) ...")
    work = out.with_name(out.name.removesuffix(".tar.gz") + ".build")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        env = work / ENV_DIR_NAME
        # From the base interpreter (venv uses sys._base_executable): bin/python links to it, not to .venv.
        _run([sys.executable, "-m", "venv", "--without-pip", str(env)], "creating the executors' venv", cwd=work)
        (work / "constraints.txt").write_text("\n".join(constraints) + "\n")
        # This venv's pip installs into the new one (--python): the env itself carries no pip.
        _run([sys.executable, "-m", "pip", "--python", str(env / "bin" / "python"), "install", "--no-input", "-q",
              "-c", str(work / "constraints.txt"), *requirements], "installing the executors' dependencies", cwd=work)
        _check(env)
        partial = out.with_suffix(".partial")
        with tarfile.open(partial, "w:gz", compresslevel=6) as archive:
            # The env's contents at the archive's root: Spark unpacks it into ./environment.
            for path in sorted(env.iterdir()):
                archive.add(path, arcname=path.name)
        partial.replace(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for stale in out.parent.glob("executor-env-*.tar.gz"):
        if stale != out:
            stale.unlink()
    log(f"executors' Python environment: {out} ({out.stat().st_size / 1e6:.0f} MB)")
    return out


def existing(settings: Settings) -> Path:
    """The archive for today's dependencies; a clear error when ``cluster-up`` has not built it."""
    out = archive_path(settings, runtime_requirements(), pinned_versions())
    if not out.exists():
        raise StackError(f"no executors' Python environment at {out}: run `python -m deploy cluster-up` "
                         f"(`make cluster-up`), which builds it")
    return out
