"""Versioned model artifacts in ``settings.model_registry`` (git-ignored ``models/registry/``).

One folder per version, ``<registry>/<version>/``::

    model.joblib              the fitted scikit-learn estimator
    meta.json                 version, name, features + feature signature, threshold, baseline (feature
                              medians, for the per-alert explanation), training data description and
                              seed, metrics of every model tried, created_at
    terminal_features.parquet the terminal feature table built from the training data's labels
    test_predictions.parquet  the test week's scores of every model (for ``python -m models report``)

The version id is ``<UTC timestamp to the microsecond>-<8 hex of a content hash>``, so versions sort by time. ``load``
takes a version id, a model name (its newest version) or ``latest`` and REFUSES a model whose feature
list or feature signature differs from ``models.features``: a model scored on features it was not
trained on gives confident nonsense, so that is an error, never a warning.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd

from models import features as fx

MODEL_FILE, META_FILE = "model.joblib", "meta.json"
TERMINAL_FILE, PREDICTIONS_FILE = "terminal_features.parquet", "test_predictions.parquet"


class RegistryError(RuntimeError):
    """No such model, or no model at all."""


class FeatureMismatchError(RegistryError):
    """The model was trained on other features than the code defines now."""


@dataclass
class ModelArtifact:
    name: str
    estimator: Any
    features: list[str]
    threshold: float
    baseline: dict[str, float]
    terminal_table: pd.DataFrame | None = None
    meta: dict = field(default_factory=dict)
    version: str = ""
    feature_signature: str = field(default_factory=fx.feature_signature)

    def __repr__(self) -> str:   # the estimator and table are too big to print
        return f"ModelArtifact(name={self.name!r}, version={self.version!r}, threshold={self.threshold:.4f})"


def registry_dir(path: Path | str | None = None) -> Path:
    if path is not None:
        return Path(path)
    from common.settings import get_settings
    return get_settings().model_registry


def save(artifact: ModelArtifact, registry: Path | str | None = None,
         predictions: pd.DataFrame | None = None) -> str:
    """Write a new version and return its id (also set on ``artifact.version``)."""
    import joblib

    root = registry_dir(registry)
    created = datetime.now(timezone.utc)
    meta = dict(artifact.meta)
    meta.update(name=artifact.name, features=list(artifact.features), feature_signature=artifact.feature_signature,
                threshold=float(artifact.threshold), baseline={k: float(v) for k, v in artifact.baseline.items()},
                created_at=created.strftime("%Y-%m-%dT%H:%M:%SZ"))
    digest = hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode()).hexdigest()[:8]
    version = f"{created.strftime('%Y%m%dT%H%M%S%f')}-{digest}"   # sorts by creation time
    meta["version"] = version
    tmp = root / f".{version}.tmp"
    tmp.mkdir(parents=True, exist_ok=False)
    joblib.dump(artifact.estimator, tmp / MODEL_FILE)
    if artifact.terminal_table is not None:
        artifact.terminal_table.to_parquet(tmp / TERMINAL_FILE, index=False)
    if predictions is not None:
        predictions.to_parquet(tmp / PREDICTIONS_FILE, index=False)
    (tmp / META_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True, default=str) + "\n")
    tmp.rename(root / version)                  # a version appears whole or not at all
    artifact.version, artifact.meta = version, meta
    return version


def versions(registry: Path | str | None = None) -> list[dict]:
    """Meta of every stored version, oldest first."""
    root = registry_dir(registry)
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        meta_path = folder / META_FILE
        if meta_path.is_file():
            found.append(json.loads(meta_path.read_text()))
    return found


def latest_version(registry: Path | str | None = None) -> str | None:
    """The id ``load("latest")`` would load, or None when the registry is empty or its newest model was
    trained on other features than the code defines (``demo`` then trains one)."""
    stored = versions(registry)
    if not stored:
        return None
    try:
        check_features(stored[-1])
    except FeatureMismatchError:
        return None
    return stored[-1]["version"]


def resolve(ref: str = "latest", registry: Path | str | None = None) -> Path:
    """The folder of ``ref``: a version id, a model name (its newest version) or ``latest``."""
    root = registry_dir(registry)
    stored = versions(root)
    if not stored:
        raise RegistryError(f"no model in the registry {root}: run `make train` "
                            f"(python -m models train) first")
    if ref == "latest":
        return root / stored[-1]["version"]
    exact = [m for m in stored if m["version"] == ref]
    named = [m for m in stored if m.get("name") == ref]
    if exact or named:
        return root / (exact or named)[-1]["version"]
    raise RegistryError(f"no model {ref!r} in {root}; stored: "
                        + ", ".join(f"{m['version']} ({m.get('name')})" for m in stored))


def read_meta(ref: str = "latest", registry: Path | str | None = None) -> dict:
    """The metadata of ``ref`` (see ``resolve``), without loading the model."""
    return json.loads((resolve(ref, registry) / META_FILE).read_text())


def check_features(meta: dict) -> None:
    """Raise ``FeatureMismatchError`` unless ``meta`` was trained on the code's current features."""
    trained, current = list(meta.get("features") or []), fx.FEATURES
    if trained != current or meta.get("feature_signature") != fx.feature_signature():
        missing = [f for f in current if f not in trained]
        extra = [f for f in trained if f not in current]
        detail = (f"missing {missing}, unknown {extra}" if missing or extra else
                  f"same names, other definitions (signature {meta.get('feature_signature')} != "
                  f"{fx.feature_signature()})")
        raise FeatureMismatchError(
            f"model {meta.get('version') or meta.get('name')!r} was trained on other features than "
            f"models/features.py defines ({detail}): retrain it with `make train`")


def load(ref: str = "latest", registry: Path | str | None = None, with_table: bool = True) -> ModelArtifact:
    """Load a version (see ``resolve``); refuses a feature-list mismatch before unpickling anything."""
    import joblib

    folder = resolve(ref, registry)
    meta = json.loads((folder / META_FILE).read_text())
    check_features(meta)
    table = None
    if with_table and (folder / TERMINAL_FILE).is_file():
        table = pd.read_parquet(folder / TERMINAL_FILE)
    return ModelArtifact(name=meta["name"], estimator=joblib.load(folder / MODEL_FILE),
                         features=list(meta["features"]), threshold=float(meta["threshold"]),
                         baseline=dict(meta.get("baseline") or {}), terminal_table=table, meta=meta,
                         version=meta["version"], feature_signature=meta["feature_signature"])


def predictions(ref: str = "latest", registry: Path | str | None = None) -> pd.DataFrame | None:
    path = resolve(ref, registry) / PREDICTIONS_FILE
    return pd.read_parquet(path) if path.is_file() else None
