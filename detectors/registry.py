"""The registered detectors: explicit and listable (``python -m detectors list``).

To add a detector: write ``detectors/<name>.py`` exporting ``DETECTOR`` (copy ``detectors/template.py``),
import it below and add it to ``REGISTRY``. Every detector listed here is put through the shared contract
suite (``tests/integration/test_detector_contract.py``) automatically.

A detector that needs something besides the stream (``ml_score``: a trained model) defines
``preflight(params)`` in its module, raising ``RuntimeError`` with what to do; ``problems`` collects
those messages so ``python -m detectors run`` refuses to start before Spark does.
"""

from __future__ import annotations

import sys

from detectors import amount_anomaly, double_swipe, impossible_travel, ml_score, velocity
from detectors.base import Detector

REGISTRY: dict[str, Detector] = {
    detector.name: detector
    for detector in (
        double_swipe.DETECTOR,
        velocity.DETECTOR,
        amount_anomaly.DETECTOR,
        impossible_travel.DETECTOR,
        ml_score.DETECTOR,
    )
}


def get(name: str) -> Detector:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"no detector named {name!r}; registered: {', '.join(REGISTRY)}") from None


def all() -> list[Detector]:  # noqa: A001 - the registry's natural verb; builtins.all is not needed here
    return list(REGISTRY.values())


def names() -> list[str]:
    return list(REGISTRY)


def resolve(requested: list[str] | None) -> list[Detector]:
    """The detectors named (in order, duplicates removed), or all of them when none are named."""
    if not requested:
        return all()
    return [get(name) for name in dict.fromkeys(requested)]


def problems(detectors: list[Detector]) -> list[str]:
    """What would stop these detectors at start (their modules' ``preflight``), one message each."""
    found = []
    for detector in detectors:
        check = getattr(sys.modules.get(detector.detect.__module__), "preflight", None)
        if check is None:
            continue
        try:
            check(detector.params)
        except RuntimeError as error:
            message = str(error)
            found.append(message if message.startswith(detector.name) else f"{detector.name}: {message}")
    return found
