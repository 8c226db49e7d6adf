"""ml_score: a trained model scores every transaction; alerts above the threshold chosen on validation.

Pipeline (static DataFrame or stream alike)::

    transactions ─► static: per customer, pandas (applyInPandas): row + customer features
                    stream: each row with its customer's last 31 days (detectors.operators.with_history, keyed JVM
                    state), then row + customer features in the next step's pandas call
                 ─► mapInPandas: the terminal table's (terminal_id, day) row, from a lookup broadcast to
                     the Python workers once; terminal features (day D-7's labels up to t - 7 days; no row = 0)
                 ─► mapInPandas: predict_proba, keep score >= threshold, explain the kept rows
                 ─► alerts (one per transaction, txn_ids = [txn_id])

Features: ``models.features`` (the same functions training used; see its docstring for why customer
windows are streamed state and terminal risk is a batch table). Explanation: ``models.scoring.explain``
(the score drop when a feature alone is set to its training median); the evidence map holds ``score``,
``threshold`` and the values of the ``top_features`` features that raised the score most.

Where the model and the terminal table come from: ``params.artifact`` (a ``models.registry.ModelArtifact``,
with its ``terminal_table``; ``params.terminal_table`` overrides it). Tests and backtests pass them in
(``DETECTOR.with_params(artifact=...)`` or ``bind(...)``). When ``params.artifact`` is None, ``detect``
resolves ``params.model`` (default ``latest``) through ``models.registry`` once, on the driver, while
the query plan is built (the runner has no hook for loading detector inputs yet): no row ever touches a
file. The registry is ``settings.model_registry`` (``FRAUD_MODEL_REGISTRY``). With no usable model,
``preflight`` (called by ``python -m detectors run`` before Spark starts) and ``detect`` fail at once with
"run `make train`".

State: one row per customer (JVM, ``fraud.spark.RecentHistory``), the last 31 days of (event time, amount),
at most ``models.features.CUSTOMER_HISTORY_MAX_ROWS`` of them, 16 bytes per transaction, evicted by an event-time
timeout 31 days after the customer's last transaction.
Rows behind the watermark are dropped. No Python state: the query may hold other detectors' keyed state too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterator

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from detectors.base import TRIGGER_COLUMNS, TRIGGER_DDL, Detector, alerts


@dataclass(frozen=True)
class MLScoreParams:
    model: str = "latest"
    """Registry reference used when no artifact is given: ``latest``, a model name or a version id."""

    threshold: float | None = field(default=None, metadata={"range": (0.0, 1.0)})
    """None: the artifact's threshold, chosen on validation data to maximise F1. Set it to trade
    precision for recall without retraining."""

    top_features: int = field(default=3, metadata={"range": (1, 24)})   # the model has 24
    """How many of the features that drove the score go into the evidence (and the reason)."""

    artifact: object = field(default=None, compare=False, repr=False)
    """A loaded ``models.registry.ModelArtifact`` (tests, backtests, ``bind``). None: load ``model``."""

    terminal_table: object = field(default=None, compare=False, repr=False)
    """A pandas terminal feature table (``models.features.terminal_feature_table``) overriding the
    artifact's, e.g. today's refresh by the daily labelled batch."""


def _registry_errors(action):
    from models import registry

    try:
        return action()
    except registry.FeatureMismatchError as error:
        raise RuntimeError(f"ml_score: {error}") from None
    except registry.RegistryError as error:
        raise RuntimeError(f"ml_score: no model to score with: {error}") from None


@lru_cache(maxsize=4)
def _load(ref: str, registry_dir: str):
    from models import registry

    return _registry_errors(lambda: registry.load(ref, registry_dir))


def _load_from_settings(ref: str):
    from models import registry

    return _load(ref, str(registry.registry_dir()))


def preflight(params: MLScoreParams) -> None:
    """Raise ``RuntimeError`` ("run `make train`") unless ``params`` name a model trained on the code's
    features: reads the registry's metadata only, so a job can refuse to start before Spark does."""
    from models import registry

    if params.artifact is None:
        _registry_errors(lambda: registry.check_features(registry.read_meta(params.model)))


def bind(model: str = "latest", registry_dir=None, terminal_table: pd.DataFrame | None = None) -> Detector:
    """``DETECTOR`` with a model loaded from the registry (the I/O adapter around the pure detector)."""
    from models import registry

    return DETECTOR.with_params(model=model, artifact=registry.load(model, registry_dir),
                                terminal_table=terminal_table)


def _scored_schema(top: int) -> str:
    parts = ["txn_id string", "card_id string", "event_time timestamp", TRIGGER_DDL, "score double"]
    for i in range(top):
        parts += [f"f{i}_name string", f"f{i}_value double", f"f{i}_contribution double"]
    return ", ".join(parts)


def _score_function(estimator, features: list[str], baseline: dict[str, float], threshold: float, top: int):
    def score(frames: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from models import scoring

        for pdf in frames:
            if pdf.empty:
                continue
            X = scoring.matrix(pdf, features)
            scores = scoring.predict(estimator, X)
            hit = scores >= threshold
            if not hit.any():
                continue
            rows, X_hit, s_hit = pdf.loc[hit].reset_index(drop=True), X[hit], scores[hit]
            which, contribution = scoring.explain(estimator, X_hit, s_hit, features, baseline, top)
            out = rows[["txn_id", "card_id", "event_time", *TRIGGER_COLUMNS]].assign(score=s_hit)
            for i in range(top):
                out[f"f{i}_name"] = np.asarray(features, dtype=object)[which[:, i]]
                out[f"f{i}_value"] = X_hit[np.arange(len(X_hit)), which[:, i]]
                out[f"f{i}_contribution"] = contribution[:, i]
            yield out

    return score


def detect(transactions: DataFrame, params: MLScoreParams) -> DataFrame:
    from models import features as fx
    from detectors.ml_features import features_frame

    artifact = params.artifact if params.artifact is not None else _load_from_settings(params.model)
    if list(artifact.features) != fx.FEATURES:
        raise RuntimeError(f"ml_score: model {artifact.version or artifact.name} was trained on other features "
                           f"than models/features.py defines: retrain it with `make train`")
    threshold = float(artifact.threshold if params.threshold is None else params.threshold)
    top = max(1, min(int(params.top_features), len(fx.FEATURES)))
    table = params.terminal_table if params.terminal_table is not None else artifact.terminal_table
    featured = features_frame(transactions, table)
    scored = featured.mapInPandas(_score_function(artifact.estimator, list(fx.FEATURES), dict(artifact.baseline),
                                                  threshold, top), _scored_schema(top))
    drivers = ", ".join(["%s=%.2f (+%.2f)"] * top)
    evidence = F.create_map(F.lit("score"), F.col("score"), F.lit("threshold"), F.lit(threshold),
                            *[c for i in range(top) for c in (F.col(f"f{i}_name"), F.col(f"f{i}_value"))])
    return scored.select(*alerts(
        DETECTOR,
        card_id=F.col("card_id"),
        txn_ids=F.array(F.col("txn_id")),
        event_time=F.col("event_time"),
        score=F.col("score"),
        reason=F.format_string(f"model score %.3f >= threshold %.3f; driven by {drivers}",
                               F.col("score"), F.lit(threshold),
                               *[c for i in range(top) for c in (F.col(f"f{i}_name"), F.col(f"f{i}_value"),
                                                                 F.col(f"f{i}_contribution"))]),
        evidence=evidence,
    ))


DETECTOR = Detector(
    name="ml_score",
    # 3.0.0: the customer windows' state kept per bucket of customers (same alerts; checkpoints of 2.x
    # cannot be resumed).
    # 4.0.0: 8 buckets instead of 64 (same alerts; checkpoints of 3.x cannot be resumed).
    # 5.0.0: the customer windows' history as keyed JVM state per customer (detectors.operators.with_history) and
    # the features computed statelessly (same alerts; checkpoints of 4.x cannot be resumed).
    version="5.0.0",
    description="a trained model (models/) scores every transaction on the Handbook's 15 features and 9 on "
                "the customer's own amounts",
    # Customer windows are per-customer state; two minutes absorbs producer lag and
    # partition skew like the other detectors.
    watermark="2 minutes",
    params=MLScoreParams(),
    detect=detect,
    scenarios=("compromised_terminal", "compromised_card", "amount_over_220"),
)
