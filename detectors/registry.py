"""The registered detectors: explicit and listable (``python -m detectors list``).

To add a detector: write ``detectors/<name>.py`` exporting ``DETECTOR`` (copy ``detectors/template.py``),
import it below and add it to ``REGISTRY``. Every detector listed here is put through the shared contract
suite (``tests/integration/test_detector_contract.py``) automatically.
"""

from __future__ import annotations

from detectors import amount_anomaly, double_swipe, impossible_travel, velocity
from detectors.base import Detector

REGISTRY: dict[str, Detector] = {
    detector.name: detector
    for detector in (
        double_swipe.DETECTOR,
        velocity.DETECTOR,
        amount_anomaly.DETECTOR,
        impossible_travel.DETECTOR,
        # ml_score.DETECTOR,   # comes with the models issue: a model scoring each transaction
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
