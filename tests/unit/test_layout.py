"""The folders are the architecture (docs/architecture.md, "Layout"): who may import whom."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]

# Each package and the packages it may import. The Spark job and the downstream services never import
# each other: they meet at Kafka topics and the contracts in common/.
ALLOWED = {
    "common": set(),
    "producers": {"common"},
    "models": {"common", "producers"},
    "detectors": {"common", "models"},
    "spark_job": {"common", "detectors"},
    "sinks": {"common"},
    "deploy": {"common"},
    "demo": {"common", "deploy", "detectors", "models", "spark_job"},
    "bench": {"common", "deploy", "detectors", "models", "producers", "sinks", "spark_job"},
}


def imports_of(package: str) -> dict[str, set[str]]:
    """For each project package that ``package`` imports: the files that import it."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in ALLOWED and top != package:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_the_spark_job_and_the_sinks_never_import_each_other():
    assert "sinks" not in imports_of("spark_job")
    assert not {"spark_job", "detectors", "models"} & set(imports_of("sinks"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_package_imports_only_what_the_architecture_allows(package):
    wrong = {other: files for other, files in imports_of(package).items() if other not in ALLOWED[package]}
    assert not wrong, f"{package} imports {wrong}; see docs/architecture.md (Layout)"


def test_every_package_is_in_the_table():
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} - {"tests"}
    assert packages == set(ALLOWED)


def test_the_import_check_sees_a_forbidden_import(tmp_path, monkeypatch):
    (tmp_path / "sinks").mkdir()
    (tmp_path / "sinks" / "bad.py").write_text("from spark_job.alert_writer import ExactlyOnceWriter\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert imports_of("sinks") == {"spark_job": {"sinks/bad.py"}}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle between packages, each as the path that closes it (``[a, b, a]``)."""
    found, done = [], set()

    def visit(package: str, path: list[str]) -> None:
        for other in sorted(graph.get(package, ())):
            if other in path:
                found.append(path[path.index(other):] + [other])
            elif other not in done:
                visit(other, path + [other])
        done.add(package)

    for package in sorted(graph):
        if package not in done:
            visit(package, [package])
    return found


def import_graph() -> dict[str, set[str]]:
    return {package: set(imports_of(package)) for package in ALLOWED}


def test_no_package_imports_one_that_imports_it_back():
    assert cycles(import_graph()) == [], "an import cycle between packages; see docs/architecture.md (Layout)"
    assert cycles(ALLOWED) == [], "the table itself allows a cycle"


def test_the_cycle_check_sees_a_planted_cycle(tmp_path, monkeypatch):
    for package, line in (("detectors", "from spark_job import options\n"),
                          ("spark_job", "import detectors.registry\n")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "planted.py").write_text(line)
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert cycles(import_graph()) == [["detectors", "spark_job", "detectors"]]


def test_test_helpers_live_under_tests():
    helpers = [str(p.relative_to(ROOT)) for package in ALLOWED for p in (ROOT / package).rglob("*.py")
               if p.stem in ("testing", "factories", "fixtures") or p.stem.startswith("test_")]
    assert helpers == []
