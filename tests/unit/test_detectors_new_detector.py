"""The `make new-detector` script: copies the template and a test skeleton, refuses to overwrite."""

from __future__ import annotations

import shutil

import pytest

from detectors import new_detector


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "detectors").mkdir()
    shutil.copy(new_detector.ROOT / "detectors" / "template.py", tmp_path / "detectors" / "template.py")
    return tmp_path


def test_creates_module_and_test(tree):
    module, test, registration = new_detector.create("cash_out", tree)
    assert 'name="cash_out"' in module.read_text() and "__NAME__" not in module.read_text()
    assert "from detectors.cash_out import DETECTOR" in test.read_text()
    assert "cash_out.DETECTOR" in registration
    compile(module.read_text(), str(module), "exec")
    compile(test.read_text(), str(test), "exec")


def test_refuses_bad_names_and_overwrites(tree):
    with pytest.raises(ValueError):
        new_detector.create("Bad-Name", tree)
    new_detector.create("cash_out", tree)
    with pytest.raises(FileExistsError):
        new_detector.create("cash_out", tree)


def test_template_is_a_valid_detector_module():
    from detectors import template
    assert template.DETECTOR.name == "__NAME__" and template.DETECTOR.params.min_amount > 0
