"""Card Precision@k and the Handbook's train/delay/test split, on hand-made data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from models import evaluation
from models.evaluation import Split


def test_card_precision_counts_cards_not_transactions_and_averages_days():
    #         day, card, score, fraud
    rows = [(1, "a", 0.9, 1), (1, "a", 0.8, 1),      # one card, two frauds: counts once
            (1, "b", 0.7, 0), (1, "c", 0.95, 0),
            (1, "d", 0.1, 1),                         # fraud but not in the top 2
            (2, "a", 0.2, 0), (2, "e", 0.6, 0), (2, "e", 0.99, 1)]  # card e: max score 0.99, one fraud
    day, card, score, fraud = map(np.array, zip(*rows))
    per_day = evaluation.card_precision_at_k_per_day(day, card, score, fraud, k=2)
    assert per_day.to_dict() == {1: 0.5, 2: 0.5}        # day 1: c (legit), a (fraud); day 2: e, a
    assert evaluation.card_precision_at_k(day, card, score, fraud, k=2) == 0.5
    assert evaluation.card_precision_at_k(day, card, score, fraud, k=1) == 0.5   # day 1: c; day 2: e
    # fewer cards than k: still divided by k, as the Handbook does
    assert evaluation.card_precision_at_k([1], ["a"], [0.5], [1], k=100) == 0.01


def test_card_precision_leaves_out_cards_found_on_earlier_days():
    #         day, card, score, fraud
    rows = [(1, "a", 0.9, 1), (1, "b", 0.1, 0),
            (2, "a", 0.9, 1), (2, "b", 0.8, 1), (2, "c", 0.7, 0)]   # a was found on day 1: blocked since
    day, card, score, fraud = map(np.array, zip(*rows))
    assert evaluation.card_precision_at_k_per_day(day, card, score, fraud, k=2).to_dict() == {1: 0.5, 2: 0.5}
    kept = evaluation.card_precision_at_k_per_day(day, card, score, fraud, k=2, remove_detected=False)
    assert kept.to_dict() == {1: 0.5, 2: 1.0}                       # a would count a second time
    rows = [(1, "a", 0.9, 1), (2, "a", 0.9, 0), (2, "b", 0.5, 0)]   # a legit on day 2: still left out
    day, card, score, fraud = map(np.array, zip(*rows))
    assert evaluation.card_precision_at_k_per_day(day, card, score, fraud, k=1).to_dict() == {1: 1.0, 2: 0.0}
    assert evaluation.card_precision_at_k_per_day(day, card, score, fraud, k=2).to_dict() == {1: 0.5, 2: 0.0}


def test_split_is_train_delay_test_and_drops_cards_known_to_be_defrauded():
    split = Split(train_start_day=10, train_days=2, delay_days=2, test_days=2)
    rows = [
        (9, "x", 0), (10, "a", 1), (11, "b", 0),           # day 9 is before training
        (12, "c", 1), (13, "d", 1),                        # delay days: frauds of day T-delay-1 are known on T
        (14, "a", 0), (14, "c", 0), (14, "d", 0), (14, "e", 0),   # a known from training; c not yet
        (15, "c", 0), (15, "d", 0), (15, "e", 1),          # c's fraud (day 12) known on day 15; d's not yet
        (16, "z", 0),                                      # day 16 is after the test
    ]
    frame = pd.DataFrame(rows, columns=["day", "card_id", "is_fraud"])
    train, test = evaluation.train_delay_test_split(frame, split)
    assert train["day"].tolist() == [10, 11]
    assert list(zip(test["day"], test["card_id"])) == [(14, "c"), (14, "d"), (14, "e"), (15, "d"), (15, "e")]
    assert split.test_start_day == 14
    assert split.shifted(-14).train_start_day == -4


def test_metrics_and_threshold():
    frame = pd.DataFrame({"day": [1] * 6, "card_id": list("abcdef"), "is_fraud": [0, 0, 0, 1, 1, 0]})
    score = np.array([0.1, 0.2, 0.3, 0.8, 0.9, 0.85])
    m = evaluation.metrics(frame, score, k=2)
    assert m["auc_roc"] == pytest.approx(7 / 8) and m["card_precision@2"] == 0.5
    threshold, precision, recall, f1 = evaluation.best_f1_threshold(frame["is_fraud"].to_numpy(), score)
    assert threshold == 0.8 and recall == 1.0 and precision == pytest.approx(2 / 3)
