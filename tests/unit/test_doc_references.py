"""The docs name only what exists: every Python name and repository path they quote in backticks.

README.md and docs/*.md quote the code as `detectors.operators`, `detectors.operators.pairs_within`,
`spark_job.dead_letters.MAX_DLQ_ORIGINAL_BYTES` or `spark_job/tuning/rehearsal.py`. Code moves and docs stay, so
each such name is resolved against the code here, without importing it (most of it needs pyspark): a
module is a file or package on disk, a module's name one bound at its top level, a class's name one
bound in its body (or as ``self.name`` in one of its methods), all read with ``ast``. The JVM classes,
`fraud.spark.RecentPairs`, must be Java files of spark_job/jvm or detectors/operators/java. Every dead name is listed with its
file:line. So are the docs' links to each other's sections, and the sections the code's comments cite
(``docs/performance.md, "A warm standby"``): a section renamed, its links and citations go with it.

Not Python names, so left alone: the Kafka topics common/settings.py names (`detectors.params.history`),
the git-ignored folders written at run time (`models/registry/`) and the files of the docs' example
detector, which `make new-detector NAME=cash_out` would write (`detectors/cash_out.py`).
"""

from __future__ import annotations

import ast
import os
import re
from functools import lru_cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("common", "producers", "detectors", "spark_job", "sinks", "models", "demo", "deploy", "bench", "tests")
JAVA_ROOTS = (ROOT / "spark_job" / "jvm" / "src" / "main" / "java", ROOT / "detectors" / "operators" / "java")

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_START = r"(?<![\w./\-<>])"
DOTTED = re.compile(_START + r"((?:%s)(?:\.[A-Za-z_]\w*)+)" % "|".join(PACKAGES))
JAVA_NAME = re.compile(_START + r"(fraud\.spark\.[A-Z]\w*)")
PATH = re.compile(_START + r"((?:%s|docs|\.ci)/[\w./\-]*)" % "|".join(PACKAGES))


EXAMPLE_DETECTOR = "cash_out"


@lru_cache(maxsize=None)
def topic_names(root: Path = ROOT) -> frozenset[str]:
    """The default topic names of common/settings.py: ``_env("FRAUD_TOPIC_…", "alerts.enriched")``."""
    names = set()
    for node in ast.walk(ast.parse((root / "common" / "settings.py").read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_env"
                and len(node.args) == 2 and all(isinstance(a, ast.Constant) for a in node.args)
                and str(node.args[0].value).startswith("FRAUD_TOPIC_")):
            names.add(node.args[1].value)
    return frozenset(names)


@lru_cache(maxsize=None)
def ignored_folders(root: Path = ROOT) -> tuple[str, ...]:
    """The repository's git-ignored folders below its top level (.gitignore's ``models/registry/``)."""
    lines = (root / ".gitignore").read_text().splitlines()
    return tuple(line for line in lines if line.endswith("/") and "/" in line[:-1] and not line.startswith("#"))


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def code_spans(text: str):
    """(line, content) of every inline code span; fenced blocks are left out (they hold commands)."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for match in CODE_SPAN.finditer(text):
        if "\n\n" in match.group(2):  # a span does not cross a paragraph: an unmatched backtick
            continue
        yield text.count("\n", 0, match.start()) + 1, match.group(2)


@lru_cache(maxsize=None)
def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _targets(node: ast.AST):
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)


def bound_names(body: list[ast.stmt]) -> dict[str, ast.AST]:
    """The names a module or class body binds, each with the statement binding it (its last)."""
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in _targets(target):
                    names[name] = node
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            for name in _targets(node.target):
                names[name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            for handler in getattr(node, "handlers", []):
                inner.extend(handler.body)
            names.update(bound_names(inner))
    return names


def class_names(node: ast.ClassDef) -> set[str]:
    """The names a class body binds, and the ``self.name`` its methods assign."""
    names = set(bound_names(node.body))
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for sub in ast.walk(item):
                targets = sub.targets if isinstance(sub, ast.Assign) else [getattr(sub, "target", None)]
                for target in targets:
                    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                        names.add(target.attr)
    return names


def module_file(parts: list[str], root: Path = ROOT) -> Path | None:
    """The file of module ``a.b.c``: a/b/c.py or a/b/c/__init__.py (a folder of tests counts too)."""
    base = root.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def resolve(dotted: str, root: Path = ROOT) -> str | None:
    """None when ``dotted`` names a module, a module's name or a class's name; else why not."""
    parts = dotted.split(".")
    if not (root / parts[0]).is_dir():
        return f"no package {parts[0]}/"
    found = 1
    while found < len(parts) and module_file(parts[: found + 1], root):
        found += 1
    if found == len(parts):
        return None
    module = module_file(parts[:found], root)
    if module is None:  # a folder without __init__.py (tests/e2e, say) and no module in it by that name
        return f"no module {'/'.join(parts[: found + 1])}.py"
    rest = parts[found:]
    names = bound_names(parsed(module).body)
    if rest[0] not in names:
        kind = "module or name" if module.name == "__init__.py" else "name"
        return f"{'.'.join(parts[:found])} has no {kind} {rest[0]}"
    if len(rest) == 1:
        return None
    node = names[rest[0]]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return None  # a name imported from elsewhere: its own module is where to look, not followed here
    if not isinstance(node, ast.ClassDef):
        return f"{'.'.join(parts[: found + 1])} is not a class, so it has no {rest[1]}"
    if rest[1] not in class_names(node):
        return f"class {'.'.join(parts[: found + 1])} has no {rest[1]}"
    if len(rest) > 2:
        return f"{dotted}: only module.Class.attribute is resolved"
    return None


def resolve_java(name: str, java_roots: tuple[Path, ...] = JAVA_ROOTS) -> str | None:
    paths = [root.joinpath(*name.split(".")).with_suffix(".java") for root in java_roots]
    if any(path.is_file() for path in paths):
        return None
    return "no " + " or ".join(str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p) for p in paths)


def resolve_path(path: str, root: Path = ROOT) -> str | None:
    path = path.split("::")[0].rstrip(".")
    if (root / path).exists() or path.startswith(ignored_folders(root)):
        return None
    return "no such file or folder"


def dead_references(files: list[Path], root: Path = ROOT, java_roots: tuple[Path, ...] = JAVA_ROOTS) -> list[str]:
    dead = []
    for path in files:
        where = path.relative_to(root) if path.is_relative_to(root) else path
        for line, span in code_spans(path.read_text()):
            checks = [(m, resolve(m, root)) for m in DOTTED.findall(span) if m not in topic_names(root)]
            checks += [(m, resolve_java(m, java_roots)) for m in JAVA_NAME.findall(span)]
            checks += [(m, resolve_path(m, root)) for m in PATH.findall(span)]
            dead.extend(f"{where}:{line}: `{name}`: {why}" for name, why in checks
                        if why and EXAMPLE_DETECTOR not in name)
    return dead


def test_every_name_and_path_the_docs_quote_exists():
    dead = dead_references(doc_files())
    assert not dead, "dead names in the docs:\n" + "\n".join(dead)


def test_a_dead_name_is_caught(tmp_path):
    doc = tmp_path / "planted.md"
    doc.write_text(
        "Alive: `common.settings`, `common.settings.Settings`, `detectors.operators.pairs_within(rows, key=…)`,\n"
        "`spark_job/tuning/rehearsal.py`, `fraud.spark.RecentPairs`, `tests/unit/`,\n"
        "the topic `detectors.params.history`,\n"
        "`models/registry/` (git-ignored) and `detectors/cash_out.py` (what make new-detector would write).\n"
        "\n"
        "Dead: `common.keyed_histories`, then `detectors.operators.no_such_op`\n"
        "and `spark_job/no_such_file.py`,\n"
        "`common.settings.Settings.no_such_field` and `fraud.spark.NoSuchClass`.\n"
        "```\n"
        "detectors/cash_out.py   # in a fenced block: a command's output, not checked\n"
        "```\n"
    )
    dead = dead_references([doc])
    assert dead == [
        "%s:6: `common.keyed_histories`: common has no module or name keyed_histories" % doc,
        "%s:6: `detectors.operators.no_such_op`: detectors.operators has no module or name no_such_op" % doc,
        "%s:7: `spark_job/no_such_file.py`: no such file or folder" % doc,
        "%s:8: `common.settings.Settings.no_such_field`: class common.settings.Settings has no no_such_field" % doc,
        "%s:8: `fraud.spark.NoSuchClass`: no spark_job/jvm/src/main/java/fraud/spark/NoSuchClass.java or "
        "detectors/operators/java/fraud/spark/NoSuchClass.java" % doc,
    ]


def test_names_resolve_without_importing_the_code():
    assert resolve("common") is None
    assert resolve("detectors.operators.pairs_within") is None
    assert resolve("spark_job.dead_letters.MAX_DLQ_ORIGINAL_BYTES") is None
    assert resolve("common.settings.Settings.spark_gc") is None
    assert resolve("common.keyed_histories") == "common has no module or name keyed_histories"
    assert resolve("spark_job.parsing.CANONICAL_RE") == "spark_job.parsing has no name CANONICAL_RE"
    assert resolve("nosuchpackage.x") == "no package nosuchpackage/"


LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
CITED = re.compile(r"docs/([\w-]+\.md)[,:]?\s*\(?\"([^\"]+)\"")


def headings(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())
    return [m.group(1) for m in HEADING.finditer(text)]


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for heading in headings(path):
        slug = anchor(heading)
        found.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return found


def dead_links(files: list[Path], root: Path = ROOT) -> list[str]:
    dead = []
    for path in files:
        where = path.relative_to(root) if path.is_relative_to(root) else path
        text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), path.read_text())
        for match in LINK.finditer(text):
            target = match.group(1)
            if re.match(r"[a-z]+:", target):
                continue                                    # http:, mailto:
            file, _, section = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            line = text.count("\n", 0, match.start()) + 1
            if not linked.exists():
                dead.append(f"{where}:{line}: ({target}): no such file")
            elif section and linked.suffix == ".md" and section not in anchors(linked):
                dead.append(f"{where}:{line}: ({target}): no such section in {linked.name}")
    return dead


def test_every_link_between_the_docs_reaches_its_section():
    dead = dead_links(doc_files() + [ROOT / "CONTRIBUTING.md", ROOT / "bench" / "README.md", ROOT / "deploy" / "README.md"])
    assert not dead, "dead links in the docs:\n" + "\n".join(dead)


def test_a_dead_link_is_caught(tmp_path):
    (tmp_path / "other.md").write_text("# Other\n\n## Spark settings and why\n\n## Failures: `make e2e-cluster`\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[a](other.md#spark-settings-and-why) [b](other.md#failures-make-e2e-cluster) [c](#here)\n"
                   "# Here\n[d](other.md#log-of-the-runs) [e](gone.md) [f](https://example.com/#x)\n")
    assert dead_links([doc]) == [f"{doc}:3: (other.md#log-of-the-runs): no such section in other.md",
                                 f"{doc}:3: (gone.md): no such file"]


def source_files(root: Path = ROOT) -> list[Path]:
    """The repository's code and build files, outside its dot folders (.venv, .cache, .run) and artifacts/."""
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in {"artifacts", "__pycache__"}]
        found += [Path(folder, f) for f in files if f == "Makefile" or Path(f).suffix in {".py", ".java", ".yml", ".sh"}]
    return found


def test_every_section_the_code_cites_exists():
    dead = []
    for path in sorted(source_files()):
        text = path.read_text(errors="replace")
        for match in CITED.finditer(text):
            doc = ROOT / "docs" / match.group(1)
            section = re.sub(r"\s*\n\s*(?:#|\*|//)?\s*", " ", match.group(2))   # a citation over comment lines
            line = text.count("\n", 0, match.start()) + 1
            if not doc.exists():
                dead.append(f"{path.relative_to(ROOT)}:{line}: docs/{match.group(1)}: no such file")
            elif not any(h.startswith(section) for h in headings(doc)):
                dead.append(f"{path.relative_to(ROOT)}:{line}: docs/{match.group(1)}, \"{section}\": no such section")
    assert not dead, "sections the code cites and the docs do not have:\n" + "\n".join(dead)
