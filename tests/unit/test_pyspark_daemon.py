"""The lazy zip-importer cache reset that the Python workers start with (common/pyspark_daemon.py)."""

from __future__ import annotations

import importlib
import os
import sys
import zipfile
import zipimport

import pytest

from common import pyspark_daemon


@pytest.fixture
def lazy_reset(monkeypatch):
    """install() for this test only: the original method comes back at teardown."""
    monkeypatch.setattr(zipimport.zipimporter, "invalidate_caches", zipimport.zipimporter.invalidate_caches)
    monkeypatch.setattr(zipimport.zipimporter, "_fraud_lazy_reset", False, raising=False)
    monkeypatch.setattr(pyspark_daemon, "_read_as_of", {})
    pyspark_daemon.install()
    reads = []
    original_read = zipimport._read_directory
    monkeypatch.setattr(zipimport, "_read_directory", lambda path: reads.append(path) or original_read(path))
    return reads


def _archive(path, modules: dict[str, str]) -> str:
    with zipfile.ZipFile(path, "w") as archive:
        for name, source in modules.items():
            archive.writestr(f"{name}.py", source)
    return str(path)


def test_an_unchanged_archive_is_not_read_again_and_a_changed_one_is(tmp_path, monkeypatch, lazy_reset):
    archive = _archive(tmp_path / "lib.zip", {"zipped_one": "VALUE = 1\n"})
    monkeypatch.syspath_prepend(archive)
    assert importlib.import_module("zipped_one").VALUE == 1

    importlib.invalidate_caches()        # what every Python task of Spark does first: the first one reads
    read_once = lazy_reset.count(archive)
    for _ in range(3):                   # the later ones leave the unchanged archive alone
        importlib.invalidate_caches()
    assert lazy_reset.count(archive) == read_once

    _archive(tmp_path / "lib.zip", {"zipped_one": "VALUE = 1\n", "zipped_two": "VALUE = 2\n"})
    os.utime(archive, ns=(0, 10**18))    # a new modification time even within the clock's resolution
    importlib.invalidate_caches()
    assert lazy_reset.count(archive) == read_once + 1
    assert importlib.import_module("zipped_two").VALUE == 2
    for name in ("zipped_one", "zipped_two"):
        sys.modules.pop(name, None)


def test_install_is_idempotent(lazy_reset):
    patched = zipimport.zipimporter.invalidate_caches
    pyspark_daemon.install()
    assert zipimport.zipimporter.invalidate_caches is patched


def test_preload_imports_what_it_can_and_names_what_it_cannot(monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    failed = pyspark_daemon.preload(("colorsys", "no_such_module_for_the_daemon"))
    assert "colorsys" in sys.modules
    assert failed == ["no_such_module_for_the_daemon"]
    assert "no_such_module_for_the_daemon not preloaded: ModuleNotFoundError" in capsys.readouterr().err


def test_every_preloaded_module_exists():
    """A renamed module would only show as a line in the executors' log: the list must stay importable."""
    assert pyspark_daemon.preload() == []
