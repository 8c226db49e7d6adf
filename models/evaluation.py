"""The Handbook's evaluation protocol (Le Borgne et al., ch. 4 and 5): time-based split and metrics.

* ``train_delay_test_split``: train on ``train_days`` days, skip a ``delay_days`` gap (labels of that
  period are not known yet when the model is trained), test on the ``test_days`` following days. Cards
  known to be defrauded are removed from the test set as their fraud becomes known: those of the
  training week at once, then on test day T those of day T - delay - 1 (the Handbook's
  ``get_train_test_set``): an investigator would already have blocked them.
* ``card_precision_at_k``: per day, the ``k`` cards with the highest maximum score of the day; the share
  of them with at least one fraud that day (divided by ``k`` even when fewer cards were active, as the
  Handbook does); averaged over the days. A defrauded card found in a day's top ``k`` is left out of
  the following days (the Handbook's ``card_precision_top_k(..., remove_detected_compromised_cards=True)``,
  its default): it has been blocked, and finding it again would count one card twice.
* ``metrics``: AUC ROC, average precision and CP@k.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.metrics import average_precision_score, precision_recall_curve, roc_auc_score


@dataclass(frozen=True)
class Split:
    train_start_day: int      # UTC day numbers (features.day_of)
    train_days: int = 7
    delay_days: int = 7
    test_days: int = 7

    @property
    def test_start_day(self) -> int:
        return self.train_start_day + self.train_days + self.delay_days

    def shifted(self, days: int) -> "Split":
        return Split(self.train_start_day + days, self.train_days, self.delay_days, self.test_days)

    def describe(self) -> dict:
        iso = lambda d: str(np.datetime64(int(d), "D"))  # noqa: E731
        return {"train": [iso(self.train_start_day), iso(self.train_start_day + self.train_days - 1)],
                "delay": [iso(self.train_start_day + self.train_days), iso(self.test_start_day - 1)],
                "test": [iso(self.test_start_day), iso(self.test_start_day + self.test_days - 1)]}


def train_delay_test_split(frame: pd.DataFrame, split: Split, card_column: str = "card_id"
                           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, test) rows of ``frame`` (columns ``day``, ``is_fraud`` and ``card_column``)."""
    day = frame["day"].to_numpy()
    train = frame[(day >= split.train_start_day) & (day < split.train_start_day + split.train_days)]
    known = set(train.loc[train["is_fraud"] == 1, card_column])
    parts = []
    for i in range(split.test_days):
        delay_day = split.train_start_day + split.train_days + i - 1
        newly = frame[(day == delay_day) & (frame["is_fraud"] == 1)]
        known |= set(newly[card_column])
        test_day = frame[day == split.test_start_day + i]
        parts.append(test_day[~test_day[card_column].isin(known)])
    test = pd.concat(parts) if parts else frame.iloc[:0]
    return train, test


def card_precision_at_k_per_day(day: np.ndarray, card: np.ndarray, score: np.ndarray, is_fraud: np.ndarray,
                                k: int = 100, remove_detected: bool = True) -> pd.Series:
    """CP@k of each day (index: day). ``remove_detected``: a defrauded card found in a day's top k is
    left out of the following days (the Handbook's default: an investigator has blocked it)."""
    per_card = (pd.DataFrame({"day": day, "card": card, "score": score, "fraud": is_fraud})
                .groupby(["day", "card"], sort=True).agg(score=("score", "max"), fraud=("fraud", "max"))
                .reset_index())
    detected: set = set()
    out = {}
    for d, cards in per_card.groupby("day", sort=True):
        if detected:
            cards = cards[~cards["card"].isin(detected)]
        top = cards.sort_values(["score", "card"], ascending=[False, True], kind="mergesort").head(k)
        hits = top.loc[top["fraud"] > 0, "card"]
        out[d] = len(hits) / k
        if remove_detected:
            detected.update(hits)
    return pd.Series(out, dtype=float).rename_axis("day")


def card_precision_at_k(day, card, score, is_fraud, k: int = 100, remove_detected: bool = True) -> float:
    per_day = card_precision_at_k_per_day(np.asarray(day), np.asarray(card), np.asarray(score),
                                          np.asarray(is_fraud), k, remove_detected)
    return float(per_day.mean()) if len(per_day) else float("nan")


def metrics(frame: pd.DataFrame, score: np.ndarray, k: int = 100) -> dict:
    """AUC ROC, average precision and CP@k of ``score`` on ``frame`` (day, card_id, is_fraud)."""
    y = frame["is_fraud"].to_numpy()
    both = len(np.unique(y)) == 2
    return {
        "auc_roc": float(roc_auc_score(y, score)) if both else float("nan"),
        "average_precision": float(average_precision_score(y, score)) if both else float("nan"),
        f"card_precision@{k}": card_precision_at_k(frame["day"], frame["card_id"], score, y, k),
        "transactions": int(len(y)),
        "frauds": int(y.sum()),
    }


def best_f1_threshold(y: np.ndarray, score: np.ndarray) -> tuple[float, float, float, float]:
    """The score threshold maximising F1 on (validation) data: (threshold, precision, recall, f1)."""
    precision, recall, thresholds = precision_recall_curve(y, score)
    if len(thresholds) == 0:
        return 0.5, 0.0, 0.0, 0.0
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros_like(precision),
                   where=(precision + recall) > 0)[:-1]
    i = int(np.argmax(f1))
    return float(thresholds[i]), float(precision[i]), float(recall[i]), float(f1[i])
