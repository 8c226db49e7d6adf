"""The Spark job's jars: the connector's and the job's own, which must match its Java sources."""

from __future__ import annotations

import pytest

from common.cli_errors import UserError
from common.spark import job_jar_stamp, job_jars, session_config, spark_job_sources_digest

pytestmark = pytest.mark.unit


def jars_in(tmp_path, settings):
    connector = tmp_path / "spark-kafka"
    connector.mkdir()
    (connector / "spark-sql-kafka.jar").write_bytes(b"")
    jar = tmp_path / "spark-job" / "fraud-spark-job.jar"
    jar.parent.mkdir()
    return settings.replace(spark_jars_dir=connector, spark_job_jar=jar), jar


def test_the_job_jar_built_from_the_current_sources_is_used(tmp_path, settings):
    settings, jar = jars_in(tmp_path, settings)
    jar.write_bytes(b"")
    job_jar_stamp(jar).write_text(spark_job_sources_digest())
    assert job_jars(settings) == [settings.spark_jars_dir / "spark-sql-kafka.jar", jar]


def test_a_job_jar_older_than_its_sources_is_refused_in_one_line(tmp_path, settings):
    settings, jar = jars_in(tmp_path, settings)
    jar.write_bytes(b"")
    job_jar_stamp(jar).write_text("the digest of other sources")
    with pytest.raises(UserError, match="older than spark_job/jvm: run `make fetch`"):
        job_jars(settings)


def test_a_missing_job_jar_names_the_command_that_builds_it(tmp_path, settings):
    settings, _ = jars_in(tmp_path, settings)
    with pytest.raises(UserError, match="is not built: run `make up`"):
        session_config(settings, "t", with_kafka=False)          # the detectors' harness needs it too
    with pytest.raises(UserError, match="is not built: run `make up`"):
        job_jars(settings)


def test_an_images_job_jar_without_a_stamp_is_used(tmp_path, settings):
    settings, jar = jars_in(tmp_path, settings)
    jar.write_bytes(b"")
    assert job_jars(settings)[-1] == jar


def test_a_driver_run_from_the_clusters_application_zip_uses_the_stamped_jar(tmp_path, settings, monkeypatch):
    import zipfile

    import common.spark

    settings, jar = jars_in(tmp_path, settings)
    jar.write_bytes(b"")
    job_jar_stamp(jar).write_text("the digest of the sources it was built from")
    app = tmp_path / "app.zip"                    # the code shipped to the cluster, without spark_job/jvm
    zipfile.ZipFile(app, "w").close()
    monkeypatch.setattr(common.spark, "SPARK_JOB_JVM", app / "spark_job" / "jvm")
    assert job_jars(settings)[-1] == jar
