"""Training: simulate, build features, validate, select, test, register. One function per step.

The protocol is the Handbook's (ch. 5, "model selection"), with one validation fold:

    ... warm-up (>= 37 days: 30-day windows + 7-day delay) ... | train | delay | test |
    validation fold = the same split 14 days earlier:  | train | delay | valid |

Every candidate is fitted on the validation fold's training week and scored on its validation week
(metrics, and the alert threshold that maximises F1 there), then refitted on the test split's training
week and scored on the test week. The model is *selected on validation* (highest CP@100, then average
precision); the test week only reports. The selected model, its validation threshold, its feature list
and the terminal feature table go to the registry.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from models import estimators, evaluation, features as fx, scoring
from models.data import DataSpec, simulate
from models.evaluation import Split
from models.registry import ModelArtifact

log = logging.getLogger("models.training")

VALIDATION_SHIFT_DAYS = 14          # delay + validation week: the Handbook's validation fold


@dataclass
class TrainConfig:
    data: DataSpec = field(default_factory=DataSpec)
    models: tuple[str, ...] = tuple(estimators.CANDIDATES)
    train_days: int = 7
    delay_days: int = 7
    test_days: int = 7
    k: int = 100

    def split(self, first_day: int) -> Split:
        """The test split ends on the last simulated day; training starts ``train+delay+test`` before."""
        last_day = first_day + self.data.days - 1
        start = last_day - (self.train_days + self.delay_days + self.test_days) + 1
        return Split(start, self.train_days, self.delay_days, self.test_days)


@dataclass
class Candidate:
    name: str
    validation: dict
    test: dict
    threshold: float
    threshold_stats: dict
    estimator: object
    fit_seconds: float
    test_scores: np.ndarray


def labelled_features(transactions: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(feature frame with ``is_fraud``, terminal table) of a labelled history."""
    t_ms = fx.to_ms(transactions["event_time"])
    table = fx.terminal_feature_table(transactions["terminal_id"], t_ms, transactions["is_fraud"].to_numpy())
    frame = fx.build_features(transactions, table)
    frame["is_fraud"] = transactions["is_fraud"].to_numpy()
    return frame, table


def fit(name: str, frame: pd.DataFrame, seed: int):
    from threadpoolctl import threadpool_limits

    model = estimators.make(name, seed)
    with threadpool_limits(estimators.N_JOBS):
        model.fit(scoring.matrix(frame, fx.FEATURES), frame["is_fraud"].to_numpy())
    return model


def evaluate_candidate(name: str, frame: pd.DataFrame, split: Split, seed: int, k: int = 100) -> Candidate:
    valid_split = split.shifted(-VALIDATION_SHIFT_DAYS)
    v_train, v_test = evaluation.train_delay_test_split(frame, valid_split)
    started = time.monotonic()
    model = fit(name, v_train, seed)
    v_scores = scoring.predict(model, scoring.matrix(v_test, fx.FEATURES))
    validation = evaluation.metrics(v_test, v_scores, k)
    threshold, p, r, f1 = evaluation.best_f1_threshold(v_test["is_fraud"].to_numpy(), v_scores)

    train, test = evaluation.train_delay_test_split(frame, split)
    model = fit(name, train, seed)
    fit_seconds = time.monotonic() - started
    scores = scoring.predict(model, scoring.matrix(test, fx.FEATURES))
    tested = evaluation.metrics(test, scores, k)
    y = test["is_fraud"].to_numpy()
    alerted = scores >= threshold
    tested["precision_at_threshold"] = float(y[alerted].mean()) if alerted.any() else 0.0
    tested["recall_at_threshold"] = float(alerted[y == 1].mean()) if y.any() else 0.0
    log.info("%s: validation %s, test %s (%.1f s)", name, _brief(validation, k), _brief(tested, k), fit_seconds)
    return Candidate(name, validation, tested, threshold,
                     {"precision": p, "recall": r, "f1": f1}, model, fit_seconds, scores)


def _brief(m: dict, k: int) -> str:
    return f"AUC {m['auc_roc']:.3f} AP {m['average_precision']:.3f} CP@{k} {m[f'card_precision@{k}']:.3f}"


def select(candidates: list[Candidate], k: int = 100) -> Candidate:
    return max(candidates, key=lambda c: (round(c.validation[f"card_precision@{k}"], 6),
                                          c.validation["average_precision"]))


def train(config: TrainConfig, transactions: pd.DataFrame | None = None
          ) -> tuple[ModelArtifact, pd.DataFrame, list[Candidate]]:
    """Run the whole protocol; returns the selected model's artifact (not yet saved), the test week's
    predictions of every candidate, and the candidates."""
    started = time.monotonic()
    if transactions is None:
        transactions = simulate(config.data)
    log.info("data: %d transactions, %d frauds (%.2f %%)", len(transactions), int(transactions["is_fraud"].sum()),
             100 * transactions["is_fraud"].mean())
    frame, table = labelled_features(transactions)
    split = config.split(int(frame["day"].min()))
    if split.shifted(-VALIDATION_SHIFT_DAYS).train_start_day < int(frame["day"].min()):
        raise ValueError(f"{config.data.days} days are too few for train/delay/test and a validation fold: "
                         f"use --days >= {config.train_days + config.delay_days + config.test_days + VALIDATION_SHIFT_DAYS}")
    log.info("features: %d rows in %.1f s; split %s", len(frame), time.monotonic() - started, split.describe())
    candidates = [evaluate_candidate(name, frame, split, config.data.seed, config.k) for name in config.models]
    best = select(candidates, config.k)
    train_rows, test = evaluation.train_delay_test_split(frame, split)
    baseline = {name: float(v) for name, v in train_rows[fx.FEATURES].median().items()}
    predictions = test[["txn_id", "card_id", "day", "is_fraud"]].reset_index(drop=True).copy()
    for c in candidates:
        predictions[c.name] = c.test_scores
    meta = {
        "data": config.data.describe(),
        "split": split.describe(),
        "validation_split": split.shifted(-VALIDATION_SHIFT_DAYS).describe(),
        "seed": config.data.seed,
        "rows": {"total": int(len(frame)), "train": int(len(train_rows)), "test": int(len(test)),
                 "frauds_total": int(frame["is_fraud"].sum())},
        "selected": best.name,
        "selected_by": f"validation card_precision@{config.k}, then average_precision",
        "threshold_on_validation": best.threshold_stats,
        "estimator": repr(best.estimator),
        "metrics": {c.name: {"validation": c.validation, "test": c.test, "threshold": c.threshold,
                             "fit_seconds": round(c.fit_seconds, 1)} for c in candidates},
        "k": config.k,
        "training_seconds": round(time.monotonic() - started, 1),
    }
    artifact = ModelArtifact(name=f"{config.data.profile}-{best.name}", estimator=best.estimator,
                             features=list(fx.FEATURES), threshold=best.threshold, baseline=baseline,
                             terminal_table=table, meta=meta)
    return artifact, predictions, candidates
