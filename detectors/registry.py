"""The registered detectors: explicit and listable (``python -m detectors list``).

To add a detector: ``make new-detector NAME=<name>`` writes ``detectors/<name>.py`` from
``detectors/template.py`` and registers it below, at the end of ``REGISTRY`` (or write one exporting
``DETECTOR``, import it and add it to ``REGISTRY``). Every detector listed here is put through the shared
contract suite (``tests/integration/test_detector_contract.py``) automatically.

The order is the order of the shared query's branches (``python -m detectors run --shared``), and that
order is how Spark schedules them: after the scan and validation, each detector's stateful work is one
task of one stage, and the stage's tasks start in branch order, two at a time on two cores. Longest
first keeps both cores busy to the end of the batch, so the two pair detectors come first, then the per-key
histories scored in pandas, then velocity's bursts: on 200,000-record batches of all four built-ins the other
order left a core idle for ~3 s a batch (docs/performance.md). Put an expensive new detector early.

A detector that needs something besides the stream (``ml_score``: a trained model) defines
``preflight(params)`` in its module, raising ``RuntimeError`` with what to do; ``problems`` collects
those messages so ``python -m detectors run`` refuses to start before Spark does.
"""

from __future__ import annotations

import sys
from typing import Sequence

from detectors import amount_anomaly, double_swipe, impossible_travel, ml_score, velocity
from detectors.base import Detector
# make new-detector adds its import above this line

REGISTRY: dict[str, Detector] = {
    detector.name: detector
    for detector in (
        double_swipe.DETECTOR,
        impossible_travel.DETECTOR,
        amount_anomaly.DETECTOR,
        ml_score.DETECTOR,
        velocity.DETECTOR,
        # make new-detector adds its detector above this line
    )
}


class UnknownDetectorError(KeyError):
    """No detector of that name is registered (a ``KeyError`` whose message reads as a sentence)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def get(name: str) -> Detector:
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownDetectorError(f"no detector named {name!r}; registered: {', '.join(REGISTRY)}") from None


def all() -> list[Detector]:  # noqa: A001 - the registry's natural verb; builtins.all is not needed here
    return list(REGISTRY.values())


def names() -> list[str]:
    return list(REGISTRY)


def resolve(requested: list[str] | None) -> list[Detector]:
    """The detectors named (in order, duplicates removed), or all of them when none are named."""
    if not requested:
        return all()
    return [get(name) for name in dict.fromkeys(requested)]


def in_registry_order(detectors: Sequence[Detector]) -> list[Detector]:
    """``detectors`` in registry order (unregistered ones after, as given): the shared query's branch
    order whatever order they were named in, which also keeps its stateful operators' ids, and so its
    checkpoint, independent of how a run names them."""
    position = {name: i for i, name in enumerate(REGISTRY)}
    return sorted(detectors, key=lambda d: position.get(d.name, len(position)))


def problems(detectors: list[Detector]) -> list[str]:
    """What would stop these detectors at start (their modules' ``preflight``), one message each."""
    return [message for message in map(problem, detectors) if message]


def preflight(detector: Detector):
    """Its module's ``preflight(params)``, or None for a detector that needs nothing besides the stream."""
    return getattr(sys.modules.get(detector.detect.__module__), "preflight", None)


def problem(detector: Detector) -> str | None:
    """What would stop ``detector`` at start (its module's ``preflight``), starting with its name; None
    when nothing would."""
    check = preflight(detector)
    if check is None:
        return None
    try:
        check(detector.params)
    except RuntimeError as error:
        message = str(error)
        return message if message.startswith(detector.name) else f"{detector.name}: {message}"
    return None
