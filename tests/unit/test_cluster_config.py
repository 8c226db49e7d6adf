"""deploy/cluster.py without starting anything: the three nodes' configuration, the settings that point
clients at the cluster, the spark-submit command and the code it ships."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from common.settings import Settings

pytestmark = pytest.mark.unit


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings.from_env({"cluster_dir": tmp_path / "cluster", "cluster_kafka_ports": "41000,41001,41002",
                              "cluster_kafka_controller_ports": "41003,41004,41005",
                              "cluster_spark_master_port": 41006, "checkpoint_root": str(tmp_path / "ckpt")},
                             environ={})


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def test_each_node_is_a_broker_and_a_voter_of_three_replicating_everything_three_times(settings):
    from deploy.cluster import brokers

    nodes = brokers(settings)
    for node in nodes:
        node.render_config()
    props = [_properties(node.config_file) for node in nodes]
    assert [p["node.id"] for p in props] == ["1", "2", "3"]
    assert {p["controller.quorum.voters"] for p in props} == {"1@127.0.0.1:41003,2@127.0.0.1:41004,3@127.0.0.1:41005"}
    assert props[1]["listeners"] == "CLIENT://127.0.0.1:41001,CONTROLLER://127.0.0.1:41004"
    for p in props:
        assert (p["default.replication.factor"], p["min.insync.replicas"]) == ("3", "2")
        assert (p["transaction.state.log.replication.factor"], p["transaction.state.log.min.isr"]) == ("3", "2")
        assert p["offsets.topic.replication.factor"] == "3"
        assert p["unclean.leader.election.enable"] == "false"
    assert len({node.data_dir for node in nodes}) == 3 and all(settings.cluster_dir in n.data_dir.parents for n in nodes)


def test_clients_of_the_cluster_get_its_brokers_replication_master_and_a_checkpoint_uri(settings, tmp_path):
    from deploy.cluster import cluster_env, cluster_settings

    clustered = cluster_settings(settings)
    assert clustered.kafka_bootstrap == "127.0.0.1:41000,127.0.0.1:41001,127.0.0.1:41002"
    assert clustered.replication_factor == 3
    assert clustered.spark_master == "spark://127.0.0.1:41006"
    assert clustered.checkpoint_root == (tmp_path / "ckpt").as_uri()
    assert cluster_settings(clustered) == clustered           # idempotent: a URI stays as it is
    assert cluster_env(settings)["FRAUD_CHECKPOINT_ROOT"].startswith("file:///")


def test_a_port_list_of_the_wrong_length_is_one_clear_error(settings):
    from deploy.cluster import StackError, kafka_ports

    with pytest.raises(StackError, match="FRAUD_CLUSTER_KAFKA_PORTS.*expected 3 ports"):
        kafka_ports(settings.replace(cluster_kafka_ports="41000,41001"))


def test_the_job_is_submitted_to_the_master_with_the_code_the_jars_and_the_python(settings, tmp_path):
    import sys

    from deploy.cluster import submit_command

    from deploy import executor_env

    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-sql-kafka.jar").write_bytes(b"")
    (tmp_path / "fraud-spark-job.jar").write_bytes(b"")
    settings = settings.replace(spark_jars_dir=jars, spark_job_jar=tmp_path / "fraud-spark-job.jar",
                                cluster_dir=tmp_path / "cluster")
    environment = executor_env.archive_path(settings, executor_env.runtime_requirements(),
                                            executor_env.pinned_versions())
    environment.parent.mkdir(parents=True)
    environment.write_bytes(b"")
    cmd = submit_command(settings, ["velocity"])
    assert cmd[0].endswith("bin/spark-submit")
    assert cmd[cmd.index("--master") + 1] == "spark://127.0.0.1:41006"
    assert cmd[cmd.index("--jars") + 1] == f"{jars / 'spark-sql-kafka.jar'},{tmp_path / 'fraud-spark-job.jar'}"
    # Executors: the packed env, unpacked as ./environment; the driver: this venv.
    assert cmd[cmd.index("--archives") + 1] == f"{environment}#environment"
    assert "spark.pyspark.python=./environment/bin/python" in cmd
    assert f"spark.pyspark.driver.python={sys.executable}" in cmd
    assert "spark.executorEnv.PYTHONPATH=fraud_detection_app.zip" in cmd
    assert cmd[-2:] == [str(Path(cmd[-2])), "velocity"] and cmd[-2].endswith("spark_job/__main__.py")
    assert not any("local[" in part for part in cmd)
    shipped = zipfile.ZipFile(cmd[cmd.index("--py-files") + 1]).namelist()
    for module in ("detectors/base.py", "spark_job/alert_writer.py", "common/settings.py", "models/scoring.py"):
        assert module in shipped
    assert not any(name.startswith(("tests/", "sinks/")) for name in shipped)


def test_the_writer_reads_a_checkpoint_given_as_a_file_uri_without_spark(tmp_path):
    from spark_job.alert_writer import checkpoint_query_id

    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "metadata").write_text('{"id":"0f00"}\n')
    assert checkpoint_query_id((tmp_path / "q").as_uri()) == "0f00"


def test_without_the_executors_env_submitting_is_one_clear_error(settings, tmp_path):
    from deploy.cluster import StackError, submit_command

    with pytest.raises(StackError, match="no executors' Python environment.*cluster-up"):
        submit_command(settings.replace(cluster_dir=tmp_path / "cluster"), [])


def test_the_executors_env_has_the_runtime_dependencies_but_not_pyspark_nor_the_project():
    from deploy.executor_env import pinned_versions, runtime_requirements

    requirements = runtime_requirements()
    assert "scikit-learn==1.9.1" in requirements and "pyarrow==26.0.1" in requirements
    assert not [r for r in requirements if r.startswith(("pyspark", "py4j"))]
    pins = pinned_versions()
    assert "numpy==2.4.6" in pins
    assert not [p for p in pins if p.lower().startswith(("pyspark", "py4j", "fraud-detection", "fraud_detection"))]
