"""Start a new detector from the template: ``python -m detectors.new_detector NAME`` (``make new-detector NAME=...``).

Writes ``detectors/NAME.py`` (a copy of ``detectors/template.py``) and
``tests/integration/test_detector_NAME.py`` (a test skeleton), registers the detector at the end of
``REGISTRY`` in ``detectors/registry.py``, and refuses to overwrite anything.
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{1,40}$")
# The scaffold writes the registration into registry.py (rather than the registry discovering modules):
# the registry stays one explicit, ordered list, and the order is the shared query's branch order.
IMPORT_MARK = "# make new-detector adds its import above this line\n"
ENTRY_MARK = "        # make new-detector adds its detector above this line\n"

TEST_SKELETON = '''"""Tests of the __NAME__ detector. The shared contract suite covers it too: it is registered."""

from __future__ import annotations

from datetime import timedelta

from detectors import harness
from detectors.__NAME__ import DETECTOR
from detectors.samples import T0, txn


def test_fires_on_its_pattern(spark):
    # Build the situation with explicit event times; replace with your pattern.
    txns = [txn("card-1", T0, 2500.0, mcc="6051")]
    [alert] = harness.run_static(DETECTOR, txns, spark)
    assert alert["txn_ids"] == [txns[0]["txn_id"]]


def test_silent_on_a_look_alike(spark):
    txns = [txn("card-1", T0, 2500.0, mcc="5411")]      # a big purchase at a grocer: not a cash-out
    assert harness.run_static(DETECTOR, txns, spark) == []


def test_streaming_gives_the_same_alerts(spark, tmp_path):
    txns = [txn("card-1", T0, 2500.0, mcc="6051"), txn("card-2", T0 + timedelta(minutes=5), 10.0)]
    batches = [[t] for t in txns] + [[harness.watermark_tick(T0 + timedelta(days=1))]]
    result = harness.run_microbatches(DETECTOR, batches, spark, tmp_path / "checkpoint")
    assert result.alerts == harness.run_static(DETECTOR, txns, spark)
'''


def create(name: str, root: Path = ROOT) -> tuple[Path, Path]:
    if not NAME_RE.match(name) or keyword.iskeyword(name):
        raise ValueError(f"detector name must be a lower-case Python identifier (a-z, 0-9, _): {name!r}")
    module = root / "detectors" / f"{name}.py"
    test = root / "tests" / "integration" / f"test_detector_{name}.py"
    for path in (module, test):
        if path.exists():
            raise FileExistsError(f"{path.relative_to(root)} exists already")
    registry = root / "detectors" / "registry.py"
    registered = registry.read_text(encoding="utf-8")
    for mark, line in ((IMPORT_MARK, f"from detectors import {name}\n"), (ENTRY_MARK, f"        {name}.DETECTOR,\n")):
        if registered.count(mark) != 1:
            raise ValueError(f"detectors/registry.py has lost the line {mark.strip()!r}: register {name} by hand")
        registered = registered.replace(mark, line + mark)
    template = (root / "detectors" / "template.py").read_text(encoding="utf-8")
    module.write_text(template.replace("__NAME__", name), encoding="utf-8")
    test.parent.mkdir(parents=True, exist_ok=True)
    test.write_text(TEST_SKELETON.replace("__NAME__", name), encoding="utf-8")
    registry.write_text(registered, encoding="utf-8")
    return module, test


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m detectors.new_detector", description=__doc__)
    parser.add_argument("name", help="the detector's name, a Python identifier such as large_cash_out")
    args = parser.parse_args(argv)
    try:
        module, test = create(args.name)
    except (ValueError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"created {module.relative_to(ROOT)}\ncreated {test.relative_to(ROOT)}\n"
          f"registered {args.name} at the end of REGISTRY in detectors/registry.py (`python -m detectors list`)\n"
          f"now run: .venv/bin/python -m pytest {test.relative_to(ROOT)} tests/integration/test_detector_contract.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
