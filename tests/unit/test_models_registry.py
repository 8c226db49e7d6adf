"""The model registry: versions, latest, names, and refusal of a model trained on other features."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from models import features as fx, registry
from models.registry import FeatureMismatchError, ModelArtifact, RegistryError


def _artifact(name="tiny", threshold=0.5):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, len(fx.FEATURES))), np.r_[np.zeros(30), np.ones(10)]
    model = LogisticRegression().fit(X, y)
    table = pd.DataFrame({"terminal_id": ["T"], "day": [1], **{n: [2.0] for n in fx.TERMINAL_DAY_COUNTS},
                          "recent_ms": [np.array([5, 7])], "recent_fraud": [np.array([1.0, 0.0])]})
    return ModelArtifact(name=name, estimator=model, features=list(fx.FEATURES), threshold=threshold,
                         baseline={n: 0.0 for n in fx.FEATURES}, terminal_table=table,
                         meta={"data": {"profile": "handbook", "seed": 1}, "seed": 1})


def test_save_and_load_latest_by_name_and_version(tmp_path):
    first = registry.save(_artifact("alpha", 0.3), tmp_path)
    second = registry.save(_artifact("beta", 0.7), tmp_path)
    assert first != second and len(registry.versions(tmp_path)) == 2
    assert registry.load("latest", tmp_path).version == second
    loaded = registry.load("alpha", tmp_path)
    assert loaded.version == first and loaded.threshold == 0.3 and loaded.features == fx.FEATURES
    assert loaded.meta["seed"] == 1 and loaded.meta["feature_signature"] == fx.feature_signature()
    assert loaded.terminal_table["days_nb_fraud_7d"].tolist() == [2.0]
    assert loaded.terminal_table["recent_ms"][0].tolist() == [5, 7]
    assert loaded.estimator.predict_proba(np.zeros((1, len(fx.FEATURES)))).shape == (1, 2)
    assert registry.load(second, tmp_path).name == "beta"


def test_empty_registry_says_to_train(tmp_path):
    with pytest.raises(RegistryError, match="make train"):
        registry.load("latest", tmp_path / "nothing")
    assert registry.latest_version(tmp_path / "nothing") is None
    registry.save(_artifact(), tmp_path)
    with pytest.raises(RegistryError, match="no model 'gamma'"):
        registry.load("gamma", tmp_path)


def _tamper(tmp_path, version, **changes):
    path = tmp_path / version / registry.META_FILE
    meta = json.loads(path.read_text())
    meta.update(changes)
    path.write_text(json.dumps(meta))


def test_refuses_a_model_trained_on_another_feature_list(tmp_path):
    version = registry.save(_artifact(), tmp_path)
    assert registry.latest_version(tmp_path) == version
    _tamper(tmp_path, version, features=fx.FEATURES[:-1] + ["terminal_risk_90d"])
    assert registry.latest_version(tmp_path) is None          # the demo trains a new one
    with pytest.raises(FeatureMismatchError, match=r"missing \['terminal_risk_30d'\].*terminal_risk_90d.*make train"):
        registry.load(version, tmp_path)


def test_refuses_same_names_with_other_definitions(tmp_path):
    version = registry.save(_artifact(), tmp_path)
    _tamper(tmp_path, version, feature_signature="0" * 16)
    with pytest.raises(FeatureMismatchError, match="other definitions"):
        registry.load(version, tmp_path)


def test_reordered_features_are_refused_too(tmp_path):
    version = registry.save(_artifact(), tmp_path)
    _tamper(tmp_path, version, features=list(reversed(fx.FEATURES)))
    with pytest.raises(FeatureMismatchError):
        registry.load(version, tmp_path)
