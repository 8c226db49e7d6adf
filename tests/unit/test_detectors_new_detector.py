"""The `make new-detector` script: copies the template and a test skeleton, registers the detector,
refuses to overwrite."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from detectors import new_detector

NAME = "probe_cash_out"      # not the docs' cash_out, which the tree copied below may hold already


@pytest.fixture
def tree(tmp_path):
    shutil.copytree(new_detector.ROOT / "detectors", tmp_path / "detectors",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def test_creates_module_and_test(tree):
    module, test = new_detector.create(NAME, tree)
    assert f'name="{NAME}"' in module.read_text() and "__NAME__" not in module.read_text()
    assert f"from detectors.{NAME} import DETECTOR" in test.read_text()
    compile(module.read_text(), str(module), "exec")
    compile(test.read_text(), str(test), "exec")


def test_registers_it_last_so_the_list_shows_it(tree):
    new_detector.create(NAME, tree)
    listed = subprocess.run([sys.executable, "-m", "detectors", "list"], cwd=tree, capture_output=True,
                            text=True, check=True).stdout
    assert f"{NAME} 0.1.0" in listed and listed.index("velocity ") < listed.index(f"{NAME} ")
    registry = (tree / "detectors" / "registry.py").read_text()
    assert registry.count(NAME) == 2 and registry.count(new_detector.ENTRY_MARK) == 1


def test_refuses_bad_names_overwrites_and_a_registry_without_its_marks(tree):
    with pytest.raises(ValueError):
        new_detector.create("Bad-Name", tree)
    new_detector.create(NAME, tree)
    with pytest.raises(FileExistsError):
        new_detector.create(NAME, tree)
    registry = tree / "detectors" / "registry.py"
    registry.write_text(registry.read_text().replace(new_detector.ENTRY_MARK, ""))
    with pytest.raises(ValueError, match="register big_amount by hand"):
        new_detector.create("big_amount", tree)
    assert not (tree / "detectors" / "big_amount.py").exists()          # nothing written


def test_template_is_a_valid_detector_module():
    from detectors import template
    assert template.DETECTOR.name == "__NAME__" and template.DETECTOR.params.min_amount > 0
