"""A query's checkpoint fits only the detectors it was first started with: Spark numbers the stateful
operators of the plan and finds each one's state by that number, so a detector added to (or taken from) a
group shifts them and the restart fails deep in the state store, or reads another detector's state.
Each query's checkpoint therefore records its detectors at its first start, and a start whose plan names
others stops with one line saying what to do."""

from __future__ import annotations

import json
from pathlib import Path

from common.cli_errors import UserError
from common.settings import local_folder

FILE = "detectors.json"      # beside Spark's own offsets/, commits/ and state/


def mismatch(query: str, recorded: list[str], planned: list[str], checkpoint: str) -> str | None:
    """The one-line problem when ``planned`` differs from the detectors the checkpoint was written with."""
    added, removed = sorted(set(planned) - set(recorded)), sorted(set(recorded) - set(planned))
    if not added and not removed:
        return None
    change = "; ".join(part for part in (added and f"{', '.join(added)} added",
                                         removed and f"{', '.join(removed)} taken out") if part)
    return (f"query {query}: its checkpoint {checkpoint} was started with {', '.join(recorded)} ({change}), "
            f"and a checkpoint fits only the detectors it was started with: run the new detector in a group "
            f"of its own (FRAUD_DETECTOR_GROUPS, --groups), or start {query} afresh by removing its checkpoint")


def check(query: str, detectors: list[str], checkpoint: str) -> None:
    """Record ``detectors`` at a query's first start; at a later one raise ``UserError`` on a mismatch.
    Only local checkpoints (a folder, ``file:``): elsewhere Spark's own error is what the user sees."""
    folder = local_folder(checkpoint)
    if folder is None or not detectors:
        return
    record = folder / FILE
    if record.exists():
        problem = mismatch(query, json.loads(record.read_text())["detectors"], detectors, checkpoint)
        if problem:
            raise UserError(problem)
        return
    if (folder / "offsets").is_dir() and any((folder / "offsets").iterdir()):
        return        # a checkpoint from before the record: nothing to compare with, left as it is
    folder.mkdir(parents=True, exist_ok=True)
    _write(record, {"detectors": sorted(detectors)})


def _write(path: Path, value: dict) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(value))
    partial.replace(path)
