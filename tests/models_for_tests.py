"""A tiny fraud model for tests, trained in seconds on a small simulated world (no files besides the
registry folder it is saved to)."""

from __future__ import annotations

from pathlib import Path

from models import evaluation, features as fx, registry, scoring, training
from models.data import DataSpec, simulate
from models.registry import ModelArtifact

# 150 customers and 300 terminals (the Handbook's density: about 2 terminals per customer), 24 days: the
# 10 days after a week of warm-up train, the last 7 choose the threshold.
TINY = DataSpec(profile="handbook", seed=3, days=24, customers=150, terminals=300)


def train_tiny_model(folder: Path | str, spec: DataSpec = TINY) -> str:
    """Train ``small_hist_gradient_boosting`` on ``spec``'s data and save it to ``folder``; the version id."""
    frame, table = training.labelled_features(simulate(spec))
    d0 = int(frame["day"].min())
    train = frame[(frame["day"] >= d0 + 7) & (frame["day"] < d0 + 17)]
    valid = frame[frame["day"] >= d0 + 17]
    model = training.fit("small_hist_gradient_boosting", train, spec.seed)
    scores = scoring.predict(model, scoring.matrix(valid, fx.FEATURES))
    threshold = evaluation.best_f1_threshold(valid["is_fraud"].to_numpy(), scores)[0]
    artifact = ModelArtifact(name="tiny-test-model", estimator=model, features=list(fx.FEATURES),
                             threshold=threshold, baseline=train[fx.FEATURES].median().to_dict(),
                             terminal_table=table, meta={"data": spec.describe(), "seed": spec.seed})
    return registry.save(artifact, folder)
