"""The local and cluster profiles: the 2-core tuning never follows the job to a cluster master."""

from __future__ import annotations

import dataclasses

import pytest

from common.settings import LOCAL_PROFILE, Settings, SettingsError

pytestmark = pytest.mark.unit

CLUSTER_MASTERS = ("spark://master:7077", "yarn", "k8s://https://api:6443")


def cluster_defaults() -> dict:
    return {f.name: f.default for f in dataclasses.fields(Settings) if f.name in LOCAL_PROFILE}


def tuned(settings: Settings) -> dict:
    return {name: getattr(settings, name) for name in LOCAL_PROFILE}


def test_a_local_master_gets_the_local_profile():
    settings = Settings.from_env(environ={"FRAUD_SPARK_MASTER": "local[2]"})
    assert settings.active_profile == "local"
    assert tuned(settings) == LOCAL_PROFILE


@pytest.mark.parametrize("master", CLUSTER_MASTERS)
def test_a_cluster_master_gets_sparks_own_defaults(master):
    settings = Settings.from_env(environ={"FRAUD_SPARK_MASTER": master})
    assert settings.active_profile == "cluster"
    assert tuned(settings) == cluster_defaults()
    # partitions from the cores
    assert settings.spark_shuffle_partitions == 0
    assert settings.spark_codegen_factory_mode == "FALLBACK" and settings.spark_codegen_large_batch_rows == 0


def test_every_local_value_differs_from_the_cluster_default():
    same = [name for name, value in LOCAL_PROFILE.items() if cluster_defaults()[name] == value]
    assert same == [], "a profile entry that changes nothing"


def test_a_variable_set_by_hand_wins_in_either_profile():
    for master in ("local[2]", "spark://m:7077"):
        settings = Settings.from_env(environ={"FRAUD_SPARK_MASTER": master, "FRAUD_SPARK_SHUFFLE_PARTITIONS": "7"})
        assert settings.spark_shuffle_partitions == 7
    assert Settings.from_env({"spark_gc": "Z"}, environ={}).spark_gc == "Z"


def test_the_profile_can_be_chosen_and_a_wrong_one_is_a_one_line_error():
    settings = Settings.from_env(environ={"FRAUD_SPARK_MASTER": "local[2]", "FRAUD_PROFILE": "cluster"})
    assert settings.active_profile == "cluster" and tuned(settings) == cluster_defaults()
    with pytest.raises(SettingsError, match="expected one of local, cluster"):
        Settings.from_env(environ={"FRAUD_PROFILE": "laptop"})


def test_a_child_given_another_master_gets_that_masters_profile():
    local = Settings.from_env(environ={"FRAUD_SPARK_MASTER": "local[2]", "FRAUD_SPARK_GC": "Serial"})
    env = local.to_env()
    assert "FRAUD_SPARK_SHUFFLE_PARTITIONS" not in env         # the profile's value: not pinned for the child
    assert env["FRAUD_SPARK_GC"] == "Serial"                   # set by hand: handed on
    child = Settings.from_env(environ={**env, "FRAUD_SPARK_MASTER": "spark://m:7077"})
    assert child.active_profile == "cluster" and child.spark_shuffle_partitions == 0
    assert Settings.from_env(environ=env) == local


def test_settings_pointed_at_a_cluster_take_its_profile_and_keep_what_was_set_by_hand():
    from deploy.cluster import cluster_settings

    local = Settings.from_env(environ={"FRAUD_SPARK_MASTER": "local[2]", "FRAUD_SPARK_GC": "Serial"})
    clustered = cluster_settings(local)
    assert clustered.active_profile == "cluster"
    assert clustered.spark_shuffle_partitions == 0
    assert clustered.spark_gc == "Serial"
    assert "FRAUD_SPARK_SHUFFLE_PARTITIONS" not in clustered.to_env()
