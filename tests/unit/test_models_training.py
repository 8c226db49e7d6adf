"""The training protocol's calendar (the Handbook's prequential folds) and selection, without fitting."""

from __future__ import annotations

from models import training
from models.data import DataSpec
from models.training import TrainConfig


def test_test_folds_end_on_the_last_day_and_step_back_a_week():
    config = TrainConfig(folds=4)
    splits = config.test_splits(last_day=200)
    assert [s.test_start_day + s.test_days - 1 for s in splits] == [200, 193, 186, 179]
    assert [s.train_start_day for s in splits] == [180, 173, 166, 159]


def test_validation_folds_precede_the_test_folds_like_the_handbooks():
    config = TrainConfig(folds=4)
    test, valid = config.test_splits(200), config.validation_splits(200)
    # start_date_training_for_valid = start_date_training - (delay + valid)
    assert valid[0].train_start_day == test[-1].train_start_day - 14
    assert [s.train_start_day for s in valid] == [145, 138, 131, 124]
    assert max(s.test_start_day + s.test_days - 1 for s in valid) < min(s.test_start_day for s in test)


def test_days_needed_leave_the_windows_a_warm_up():
    for folds in (1, 4):
        config = TrainConfig(data=DataSpec(days=TrainConfig(folds=folds).days_needed()), folds=folds)
        first_day, last_day = 0, config.data.days - 1
        assert config.validation_splits(last_day)[-1].train_start_day - training.WARM_UP_DAYS == first_day
    assert TrainConfig(folds=4).days_needed() == 114 and TrainConfig(folds=1).days_needed() == 72


def _candidate(name, cp, ap):
    return training.Candidate(name, {"card_precision@100": cp, "average_precision": ap, "auc_roc": 0.5},
                              {}, 0.5, {}, None, 0.0, None)


def test_selection_is_on_validation_cp_then_ap():
    chosen = training.select([_candidate("a", 0.30, 0.9), _candidate("b", 0.31, 0.1), _candidate("c", 0.31, 0.2)])
    assert chosen.name == "c"
