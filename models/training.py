"""Training: simulate, build features, validate, select, test, register. One function per step.

The protocol is the Handbook's (ch. 5 "model selection", ch. 6's tables): prequential folds of one
training week, a 7-day delay and one assessment week, each fold one week earlier than the next::

    ... warm-up (>= 37 days) ... | validation folds (4)            | test folds (4)          |
    test fold i:        train T-7i .. T-7i+6, delay 7 days, test T-7i+14 .. T-7i+20   (T: last day - 20)
    validation fold i:  the same with T replaced by T - 7*(folds-1) - 14   (the Handbook's
                        start_date_training_for_valid = start_date_training - delay - valid)

Every candidate is fitted on each validation fold's training week and scored on its week; it is
*selected on the validation folds' mean* (``SELECTED_BY``); the alert threshold maximises F1 on the
validation folds' pooled scores. The test folds only report: mean and standard deviation over the test
weeks, as the Handbook's tables do. The model registered is the selected candidate fitted on the most
recent test fold's training week (whose test week is the last simulated week), with its threshold,
feature list and the terminal feature table.

The quick preset (``QUICK_FOLDS``, ``QUICK_MODELS``; ``python -m models train --quick``) is the same
protocol on the same world, cut down to what ``make demo`` can wait for when no model is registered: one
validation and one test fold (72 simulated days instead of 114) and one candidate. Progress goes to a
reporter (``models.progress``): a step per fold of each candidate.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pandas as pd

from models import estimators, evaluation, features as fx, scoring
from models.data import DataSpec, simulate
from models.evaluation import Split
from models.progress import Reporter, log_reporter
from models.registry import ModelArtifact

def metric_keys(k: int = 100) -> tuple[str, str, str]:
    return "auc_roc", "average_precision", f"card_precision@{k}"


# Selection: the operational metric (analysts review the k most suspicious cards a day), then AP. The
# Handbook picks one model per metric; a detector needs one.
SELECTED_BY = "validation CP@100 (mean over the validation folds), then average precision"
WARM_UP_DAYS = max(fx.CUSTOMER_WINDOWS_DAYS[-1], fx.DELAY_DAYS + max(fx.TERMINAL_WINDOWS_DAYS))


@dataclass
class TrainConfig:
    data: DataSpec = field(default_factory=DataSpec)
    models: tuple[str, ...] = tuple(estimators.CANDIDATES)
    folds: int = 4
    train_days: int = 7
    delay_days: int = 7
    test_days: int = 7
    k: int = 100

    def test_splits(self, last_day: int) -> list[Split]:
        """Most recent first: the first one's test week ends on ``last_day``."""
        start = last_day - (self.train_days + self.delay_days + self.test_days) + 1
        return [Split(start - i * self.test_days, self.train_days, self.delay_days, self.test_days)
                for i in range(self.folds)]

    def validation_splits(self, last_day: int) -> list[Split]:
        earliest_test = self.test_splits(last_day)[-1]
        start = earliest_test.train_start_day - self.delay_days - self.test_days
        return [Split(start - i * self.test_days, self.train_days, self.delay_days, self.test_days)
                for i in range(self.folds)]

    def days_needed(self) -> int:
        return WARM_UP_DAYS + (self.train_days + self.delay_days + self.test_days) \
            + 2 * (self.folds - 1) * self.test_days + self.delay_days + self.test_days


# The demo's model when none is registered (``python -m models train --quick``): the full run's world and
# protocol with one fold and one candidate. Gradient boosting: the full run's best test AP (.706) and,
# with one OpenMP thread, among the fastest to fit. About 30 s on 2 cores against ~4 minutes.
QUICK_FOLDS = 1
QUICK_MODELS = ("hist_gradient_boosting",)


class Steps:
    """Counts the steps of a run for its reporter."""

    def __init__(self, report: Reporter, total: int):
        self.report, self.total, self.done = report, total, 0

    def finished(self, text: str) -> None:
        self.done += 1
        self.report(self.done, self.total, text)

    def starting(self, text: str) -> None:
        self.report(self.done, self.total, text)


@dataclass
class Candidate:
    name: str
    validation: dict                 # metric -> mean, f"{metric}_std", "folds": [per-fold metrics]
    test: dict
    threshold: float
    threshold_stats: dict
    estimator: object                # fitted on the most recent test fold's training week
    fit_seconds: float
    test_scores: np.ndarray          # aligned with the pooled test rows of every test fold


def labelled_features(transactions: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(feature frame with ``is_fraud``, terminal table) of a labelled history."""
    t_ms = fx.to_ms(transactions["event_time"])
    table = fx.terminal_feature_table(transactions["terminal_id"], t_ms, transactions["is_fraud"].to_numpy())
    frame = fx.build_features(transactions, table)
    frame["is_fraud"] = transactions["is_fraud"].to_numpy()
    if "scenario" in transactions:
        frame["scenario"] = transactions["scenario"].to_numpy()
    return frame, table


def fit(name: str, frame: pd.DataFrame, seed: int):
    from threadpoolctl import threadpool_limits

    model = estimators.make(name, seed)
    with threadpool_limits(estimators.OPENMP_THREADS):
        model.fit(scoring.matrix(frame, fx.FEATURES), frame["is_fraud"].to_numpy())
    return model


def summarise(per_fold: list[dict], k: int = 100) -> dict:
    """Mean and standard deviation over folds of every metric, plus the folds themselves."""
    out: dict = {"folds": per_fold}
    keys = metric_keys(k)
    for key in (*keys, "transactions", "frauds"):
        values = np.array([m[key] for m in per_fold], dtype=float)
        out[key] = float(np.nanmean(values)) if key in keys else int(values.sum())
        if key in keys:
            out[f"{key}_std"] = float(np.nanstd(values))
    return out


def run_folds(name: str, frame: pd.DataFrame, splits: list[Split], seed: int, k: int,
              on_fold: Callable[[int, dict, float], None] | None = None):
    """Fit and score ``name`` on every split: (per-fold metrics, pooled test rows, pooled scores, the
    model of the first split). ``on_fold(i, metrics, seconds)`` after each fold."""
    metrics, rows, scores, first_model = [], [], [], None
    for i, split in enumerate(splits):
        started = time.monotonic()
        train, test = evaluation.train_delay_test_split(frame, split)
        model = fit(name, train, seed)
        if first_model is None:
            first_model = model
        s = scoring.predict(model, scoring.matrix(test, fx.FEATURES))
        metrics.append({**evaluation.metrics(test, s, k), "test_week": split.describe()["test"]})
        rows.append(test)
        scores.append(s)
        if on_fold is not None:
            on_fold(i, metrics[-1], time.monotonic() - started)
    return metrics, pd.concat(rows), np.concatenate(scores), first_model


def evaluate_candidate(name: str, frame: pd.DataFrame, config: TrainConfig, last_day: int,
                       steps: Steps | None = None) -> Candidate:
    started = time.monotonic()
    seed, k = config.data.seed, config.k
    steps = steps or Steps(log_reporter, 2 * config.folds)

    def fold_done(kind: str):
        def done(i: int, metrics: dict, seconds: float) -> None:
            week = "..".join(metrics["test_week"])
            steps.finished(f"{name}: {kind} fold {i + 1}/{config.folds} (test week {week}): "
                           f"{_brief(metrics, k)} ({seconds:.1f} s)")
        return done

    v_metrics, v_rows, v_scores, _ = run_folds(name, frame, config.validation_splits(last_day), seed, k,
                                               fold_done("validation"))
    validation = summarise(v_metrics, k)
    threshold, p, r, f1 = evaluation.best_f1_threshold(v_rows["is_fraud"].to_numpy(), v_scores)
    t_metrics, t_rows, t_scores, model = run_folds(name, frame, config.test_splits(last_day), seed, k,
                                                   fold_done("test"))
    tested = summarise(t_metrics, k)
    y = t_rows["is_fraud"].to_numpy()
    alerted = t_scores >= threshold
    tested["precision_at_threshold"] = float(y[alerted].mean()) if alerted.any() else 0.0
    tested["recall_at_threshold"] = float(alerted[y == 1].mean()) if y.any() else 0.0
    fit_seconds = time.monotonic() - started
    steps.starting(f"{name}: validation {_brief(validation, k)}, test {_brief(tested, k)} ({fit_seconds:.1f} s)")
    return Candidate(name, validation, tested, threshold, {"precision": p, "recall": r, "f1": f1}, model,
                     fit_seconds, t_scores)


def _brief(m: dict, k: int) -> str:
    return " ".join(f"{label} {m[key]:.3f}" for label, key in zip(("AUC", "AP", f"CP@{k}"), metric_keys(k)))


def select(candidates: list[Candidate], k: int = 100) -> Candidate:
    return max(candidates, key=lambda c: (round(c.validation[f"card_precision@{k}"], 6),
                                          c.validation["average_precision"]))


def apply_verdicts(transactions: pd.DataFrame, verdicts: list[dict]) -> int:
    """Label the transactions that analysts' verdicts name (``common.verdicts.verdict_labels``: each
    transaction of a marked case takes the case's verdict) in place; returns how many matched."""
    from common.verdicts import VERDICT_SCENARIO, verdict_labels

    labels = verdict_labels(verdicts)
    fraud = {t for t, label in labels.items() if label["is_fraud"]}
    matched = transactions["txn_id"].isin(labels)
    transactions.loc[matched, "is_fraud"] = transactions.loc[matched, "txn_id"].isin(fraud).astype(np.int8)
    if "scenario" in transactions:
        transactions.loc[matched, "scenario"] = VERDICT_SCENARIO
    return int(matched.sum())


def train(config: TrainConfig, transactions: pd.DataFrame | None = None, progress: Reporter | None = None
          ) -> tuple[ModelArtifact, pd.DataFrame, list[Candidate]]:
    """Run the whole protocol; returns the selected model's artifact (not yet saved), the test weeks'
    predictions of every candidate, and the candidates. ``progress`` (default: the log) hears of every
    step: the data, the features, each fold of each candidate."""
    started = time.monotonic()
    steps = Steps(progress or log_reporter,
                  (transactions is None) + 1 + 2 * config.folds * len(config.models))
    if transactions is None:
        if config.data.days < config.days_needed():
            raise ValueError(f"{config.data.days} days are too few for {config.folds} validation and test "
                             f"folds after a {WARM_UP_DAYS}-day warm-up: use --days >= {config.days_needed()}")
        steps.starting(f"simulating {config.data.days} days ({config.data.profile} profile, "
                       f"seed {config.data.seed})")
        transactions = simulate(config.data)
        steps.finished(f"data: {len(transactions):,} transactions, {int(transactions['is_fraud'].sum()):,} frauds "
                       f"({100 * transactions['is_fraud'].mean():.2f} %) in {time.monotonic() - started:.1f} s")
    frame, table = labelled_features(transactions)
    first_day, last_day = int(frame["day"].min()), int(frame["day"].max())
    if config.validation_splits(last_day)[-1].train_start_day - WARM_UP_DAYS < first_day:
        raise ValueError(f"the data covers {last_day - first_day + 1} days: too few for {config.folds} "
                         f"validation and test folds after a {WARM_UP_DAYS}-day warm-up "
                         f"({config.days_needed()} days)")
    steps.finished(f"features: {len(frame):,} rows ({time.monotonic() - started:.1f} s since the start); "
                   f"{len(config.models)} candidate(s) x {config.folds} validation + {config.folds} test folds")
    candidates = [evaluate_candidate(name, frame, config, last_day, steps) for name in config.models]
    best = select(candidates, config.k)
    newest = config.test_splits(last_day)[0]
    train_rows, _ = evaluation.train_delay_test_split(frame, newest)
    baseline = {name: float(v) for name, v in train_rows[fx.FEATURES].median().items()}
    predictions = pooled_test_rows(frame, config, last_day)
    for c in candidates:
        predictions[c.name] = c.test_scores
    meta = {
        "data": config.data.describe(),
        "protocol": {"folds": config.folds, "train_days": config.train_days, "delay_days": config.delay_days,
                     "test_days": config.test_days, "warm_up_days": WARM_UP_DAYS},
        "split": newest.describe(),
        "test_splits": [s.describe() for s in config.test_splits(last_day)],
        "validation_splits": [s.describe() for s in config.validation_splits(last_day)],
        "seed": config.data.seed,
        "rows": {"total": int(len(frame)), "train": int(len(train_rows)), "test": int(len(predictions)),
                 "frauds_total": int(frame["is_fraud"].sum())},
        "selected": best.name,
        "selected_by": SELECTED_BY,
        "threshold_on_validation": best.threshold_stats,
        "estimator": repr(best.estimator),
        "metrics": {c.name: {"validation": c.validation, "test": c.test, "threshold": c.threshold,
                             "fit_seconds": round(c.fit_seconds, 1)} for c in candidates},
        "k": config.k,
        "features": list(fx.FEATURES),
        "training_seconds": round(time.monotonic() - started, 1),
    }
    artifact = ModelArtifact(name=f"{config.data.profile}-{best.name}", estimator=best.estimator,
                             features=list(fx.FEATURES), threshold=best.threshold, baseline=baseline,
                             terminal_table=table, meta=meta)
    return artifact, predictions, candidates


def pooled_test_rows(frame: pd.DataFrame, config: TrainConfig, last_day: int) -> pd.DataFrame:
    """The test rows of every test fold, in ``run_folds`` order, with their fold number."""
    parts = []
    for i, split in enumerate(config.test_splits(last_day)):
        _, test = evaluation.train_delay_test_split(frame, split)
        columns = [c for c in ("txn_id", "card_id", "day", "is_fraud", "scenario") if c in test]
        parts.append(test[columns].assign(fold=i))
    return pd.concat(parts).reset_index(drop=True)
