"""The demo benchmark's leave-one-out variants cover the local profile, each leaving out exactly its own."""

import dataclasses

import pytest

from bench.demo_latency import WORKAROUNDS, variant_run
from common.settings import LOCAL_PROFILE, Settings


def test_the_workarounds_cover_every_setting_of_the_local_profile_once():
    fields = [name for names in WORKAROUNDS.values() for name in names]
    assert sorted(fields) == sorted(LOCAL_PROFILE)


@pytest.mark.parametrize("name", list(WORKAROUNDS))
def test_leaving_one_out_gives_only_its_settings_spark_defaults(name):
    env, extra = variant_run(f"without-{name}")
    chosen = Settings.from_env(environ=env)
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert chosen.active_profile == "local" and extra == []
    for field, local_value in LOCAL_PROFILE.items():
        want = defaults[field] if field in WORKAROUNDS[name] else local_value
        assert getattr(chosen, field) == want, field


def test_leaving_out_the_rehearsal_keeps_the_profile_and_skips_the_warm_up():
    env, extra = variant_run("without-rehearsal")
    assert Settings.from_env(environ=env).spark_shuffle_partitions == LOCAL_PROFILE["spark_shuffle_partitions"]
    assert extra == ["--warmup", "0"]


def test_leaving_out_the_worker_daemon_gives_pysparks_own_in_the_local_profile():
    env, extra = variant_run("without-python_daemon")
    chosen = Settings.from_env(environ=env)
    assert chosen.active_profile == "local" and chosen.spark_python_daemon == "" and extra == []
    assert Settings.from_env(environ={}).spark_python_daemon == "common.pyspark_daemon"
