"""The local cluster: three KRaft Kafka nodes and a Spark standalone master with two workers, no Docker.

``python -m deploy cluster-up`` (``make cluster-up``) starts them on 127.0.0.1 from the same jars as the
local stack (the broker's Maven jars; pyspark's own ``spark-class`` for the Spark daemons), plus Redis,
and creates the project's topics with replication factor 3 (``min.insync.replicas=2``, the brokers'
default). ``cluster-env`` prints the variables that point every command at it; ``cluster-submit``
submits the detector job to the master with ``spark-submit`` the way a user submits it to a real one:
the project's code as a zip (``--py-files``), the Kafka connector jars (``--jars``), the executors'
Python environment packed without the project (``--archives``, ``deploy/executor_env.py``, built by
``cluster-up``). Everything it writes is under ``FRAUD_CLUSTER_DIR``;
``cluster-down`` stops it all (``docs/cluster.md``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.request
import zipfile
from pathlib import Path

from common.settings import REPO_ROOT, Settings
from common.waiting import wait_until
from deploy import executor_env
from deploy.local_stack import (DEPLOY_DIR, KafkaBroker, RedisServer, Service, StackError, ensure_java,
                                fetch_kafka, fetch_spark_jars, random_cluster_id)

HOST = "127.0.0.1"
REPLICATION = 3
# The packages the Spark driver and its executors import (spark_job's import table in docs/architecture.md).
SHIPPED_PACKAGES = ("common", "detectors", "spark_job", "models", "producers")
APP_ZIP = "fraud_detection_app.zip"


def _ports(text: str, want: int, setting: str) -> list[int]:
    try:
        ports = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        raise StackError(f"{setting}={text!r}: expected {want} comma-separated port numbers") from None
    if len(ports) != want:
        raise StackError(f"{setting}={text!r}: expected {want} ports, one per node")
    return ports


def kafka_ports(settings: Settings) -> list[tuple[int, int]]:
    """(client port, controller port) of each of the three nodes."""
    return list(zip(_ports(settings.cluster_kafka_ports, 3, "FRAUD_CLUSTER_KAFKA_PORTS"),
                    _ports(settings.cluster_kafka_controller_ports, 3, "FRAUD_CLUSTER_KAFKA_CONTROLLER_PORTS")))


def kafka_bootstrap(settings: Settings) -> str:
    return ",".join(f"{HOST}:{port}" for port, _ in kafka_ports(settings))


def master_url(settings: Settings) -> str:
    return f"spark://{HOST}:{settings.cluster_spark_master_port}"


def checkpoint_uri(root: str) -> str:
    """A checkpoint root as a URI (a local folder becomes ``file:///...``): the driver and every executor
    resolve it alike, where a relative path would be each process's own working folder."""
    return root if "://" in root else Path(root).resolve().as_uri()


def cluster_settings(settings: Settings) -> Settings:
    """``settings`` pointed at the cluster: its brokers, replication 3, its master, checkpoints as a URI."""
    return settings.replace(kafka_bootstrap=kafka_bootstrap(settings), replication_factor=REPLICATION,
                            spark_master=master_url(settings), checkpoint_root=checkpoint_uri(settings.checkpoint_root))


def cluster_env(settings: Settings) -> dict[str, str]:
    """The variables that differ for clients of the cluster (``python -m deploy cluster-env``)."""
    clustered = cluster_settings(settings)
    return {"FRAUD_KAFKA_BOOTSTRAP": clustered.kafka_bootstrap,
            "FRAUD_REPLICATION_FACTOR": str(clustered.replication_factor),
            "FRAUD_SPARK_MASTER": clustered.spark_master,
            "FRAUD_CHECKPOINT_ROOT": clustered.checkpoint_root}


# --------------------------------------------------------------------------------------------
# Kafka: three nodes, each broker and controller
# --------------------------------------------------------------------------------------------

class ClusterBroker(KafkaBroker):
    """Node ``node_id`` (1..3) of the cluster: the local stack's broker with the cluster's configuration,
    its files under ``<cluster_dir>/kafka-<node_id>``."""

    def __init__(self, settings: Settings, node_id: int):
        port, controller = kafka_ports(settings)[node_id - 1]
        super().__init__(settings.replace(kafka_bootstrap=f"{HOST}:{port}", local_kafka_controller_port=controller,
                                          run_dir=settings.cluster_dir, local_kafka_heap=settings.cluster_kafka_heap))
        self.cluster = settings
        self.node_id = node_id
        self.name = f"kafka-{node_id}"

    @property
    def data_dir(self) -> Path:
        return self.settings.run_dir / self.name / "data"

    @property
    def config_file(self) -> Path:
        return self.settings.run_dir / self.name / "server.properties"

    def render_config(self) -> None:
        voters = ",".join(f"{i}@{HOST}:{controller}" for i, (_, controller) in enumerate(kafka_ports(self.cluster), 1))
        template = (DEPLOY_DIR / "config" / "kafka-cluster.properties").read_text()
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(template.format(
            node_id=self.node_id, voters=voters, host=HOST, port=self.port,
            controller_port=self.settings.local_kafka_controller_port, data_dir=self.data_dir))

    def format_with(self, cluster_id: str) -> None:
        """Format the log directory once, with the id all three nodes share."""
        if (self.data_dir / "meta.properties").exists():
            return
        cmd = self.java_cmd("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.config_file),
                            tool=True)
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise StackError(f"formatting {self.name}'s storage failed: {result.stdout[-300:]} {result.stderr[-300:]}")

    def launch(self) -> None:
        self.start(self.java_cmd("kafka.Kafka", str(self.config_file), heap=self.settings.local_kafka_heap))


def brokers(settings: Settings) -> list[ClusterBroker]:
    return [ClusterBroker(settings, node_id) for node_id in (1, 2, 3)]


def live_brokers(settings: Settings) -> int:
    """Brokers registered with the controller quorum (0 when the cluster does not answer)."""
    from kafka.errors import KafkaError

    from common.kafka_admin import admin_client
    try:
        with admin_client(cluster_settings(settings), request_timeout_ms=3000) as admin:
            cluster = admin.describe_cluster()
    except (KafkaError, OSError):
        return 0
    return len(cluster.get("brokers") or ()) if cluster.get("controller_id", -1) != -1 else 0


def kafka_up(settings: Settings, timeout: float = 180.0) -> None:
    nodes = brokers(settings)
    if all(node.pid() for node in nodes) and live_brokers(settings) == len(nodes):
        return
    fetch_kafka(settings)
    id_file = settings.cluster_dir / "kafka-cluster-id"
    if not id_file.exists():
        id_file.parent.mkdir(parents=True, exist_ok=True)
        id_file.write_text(random_cluster_id() + "\n")
    for node in nodes:
        node.render_config()
        node.format_with(id_file.read_text().strip())
    # All three at once: a quorum of three voters elects no controller until two of them run.
    for node in nodes:
        if node.pid() is None:
            node.launch()
    _wait(lambda: live_brokers(settings) == len(nodes), timeout, "the three Kafka brokers to register",
          [n for n in nodes if n.pid() is not None] or nodes)


# --------------------------------------------------------------------------------------------
# Spark standalone: a master and two workers from pyspark's own spark-class
# --------------------------------------------------------------------------------------------

def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def daemon_env(settings: Settings) -> dict[str, str]:
    """The environment of the Spark master and workers: loopback only. No Python of the driver's: the
    executors run the one spark-submit ships (``executor_env``)."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "VIRTUAL_ENV")}
    return {**env,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": HOST,                 # the web UIs bind to it (else every interface)
            "SPARK_LOCAL_DIRS": str(settings.cluster_dir / "spark-local"),
            "SPARK_DAEMON_MEMORY": "256m"}          # the master's and workers' own heaps, not executors'


def spark_env(settings: Settings) -> dict[str, str]:
    """The environment of spark-submit: the driver runs this interpreter (client mode)."""
    return {**daemon_env(settings), "PYSPARK_DRIVER_PYTHON": sys.executable}


class SparkDaemon(Service):
    def __init__(self, settings: Settings, name: str, port: int, main_class: str, args: list[str]):
        super().__init__(name, port, settings.replace(run_dir=settings.cluster_dir))
        self.cluster, self.main_class, self.args = settings, main_class, args

    def launch(self) -> None:
        (self.cluster.cluster_dir / "spark-local").mkdir(parents=True, exist_ok=True)
        self.start([str(spark_home() / "bin" / "spark-class"), self.main_class, *self.args], env=daemon_env(self.cluster))


def spark_master(settings: Settings) -> SparkDaemon:
    return SparkDaemon(settings, "spark-master", settings.cluster_spark_master_port,
                       "org.apache.spark.deploy.master.Master",
                       ["--host", HOST, "--port", str(settings.cluster_spark_master_port),
                        "--webui-port", str(settings.cluster_spark_master_ui_port)])


def spark_workers(settings: Settings) -> list[SparkDaemon]:
    ports = _ports(settings.cluster_spark_worker_ports, 2, "FRAUD_CLUSTER_SPARK_WORKER_PORTS")
    ui_ports = _ports(settings.cluster_spark_worker_ui_ports, 2, "FRAUD_CLUSTER_SPARK_WORKER_UI_PORTS")
    return [SparkDaemon(settings, f"spark-worker-{i}", port, "org.apache.spark.deploy.worker.Worker",
                        ["--host", HOST, "--port", str(port), "--webui-port", str(ui),
                         "--cores", str(settings.cluster_spark_worker_cores),
                         "--memory", settings.cluster_spark_worker_memory,
                         "--work-dir", str(settings.cluster_dir / f"spark-worker-{i}" / "work"),
                         master_url(settings)])
            for i, (port, ui) in enumerate(zip(ports, ui_ports), 1)]


def master_state(settings: Settings) -> dict:
    """The master's JSON status page (workers, applications); {} when it does not answer."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{settings.cluster_spark_master_ui_port}/json/", timeout=3) as r:
            return json.load(r)
    except (OSError, ValueError):
        return {}


def alive_workers(settings: Settings) -> list[dict]:
    return [w for w in master_state(settings).get("workers", []) if w.get("state") == "ALIVE"]


def spark_up(settings: Settings, timeout: float = 120.0) -> None:
    master, workers = spark_master(settings), spark_workers(settings)
    ensure_java()
    if master.pid() is None:
        master.launch()
    _wait(lambda: bool(master_state(settings)), timeout, "the Spark master to answer", [master])
    for worker in workers:
        if worker.pid() is None:
            worker.launch()
    _wait(lambda: len(alive_workers(settings)) >= len(workers), timeout, "both Spark workers to register",
          [master, *workers])


def _wait(done, timeout: float, what: str, services: list[Service]) -> None:
    try:
        wait_until(lambda: any(s.exited_early() for s in services) or done(), timeout, what, interval=0.5)
    except TimeoutError:
        raise StackError(f"timed out waiting for {what} ({timeout:.0f} s); logs:\n" +
                         "\n".join(f"{s.log_file}:\n{s.tail(8)}" for s in services)) from None
    dead = [s for s in services if s.exited_early()]
    if dead:
        raise StackError(f"{dead[0].name} exited at start; its log ({dead[0].log_file}) ends with:\n{dead[0].tail()}")


# --------------------------------------------------------------------------------------------
# The whole cluster
# --------------------------------------------------------------------------------------------

def up(settings: Settings, log=print) -> Settings:
    """Start Redis, the three brokers and the Spark cluster, create the topics (replication 3); return
    the settings of the cluster's clients. Whatever started is stopped again when a part fails."""
    from deploy.topics import create_project_topics

    ensure_java()
    settings.cluster_dir.mkdir(parents=True, exist_ok=True)
    fetch_spark_jars(settings)
    clustered = cluster_settings(settings)
    executor_env.build(settings, log)
    try:
        log(f"starting Redis on {settings.redis_url.rsplit('@', 1)[-1]} ...")
        RedisServer(settings.replace(run_dir=settings.cluster_dir)).up()
        log(f"starting three Kafka brokers on {clustered.kafka_bootstrap} ...")
        kafka_up(settings)
        created = create_project_topics(clustered)
        log(f"topics (replication {REPLICATION}, min.insync.replicas 2): {', '.join(created) or 'all present'}")
        log(f"starting the Spark master on {clustered.spark_master} and two workers "
            f"({settings.cluster_spark_worker_cores} core, {settings.cluster_spark_worker_memory} each) ...")
        spark_up(settings)
    except BaseException:
        down(settings, log=lambda _m: None)
        raise
    log(f"cluster up; its client settings: eval \"$(python -m deploy cluster-env)\" ({settings.cluster_dir})")
    return clustered


def services(settings: Settings) -> list[Service]:
    """Everything ``up`` starts, in the order ``down`` stops it."""
    return [*reversed(spark_workers(settings)), spark_master(settings), *brokers(settings),
            RedisServer(settings.replace(run_dir=settings.cluster_dir))]


def down(settings: Settings, log=print) -> None:
    for service in services(settings):
        log(f"{service.name}: {'stopped' if service.stop() else 'not running'}")


def status(settings: Settings) -> dict[str, dict]:
    workers = {w.get("host", "") + ":" + str(w.get("port", "")) for w in alive_workers(settings)}
    return {"kafka brokers": {"ready": live_brokers(settings) == 3, "address": kafka_bootstrap(settings)},
            "spark master": {"ready": bool(master_state(settings)), "address": master_url(settings)},
            "spark workers": {"ready": len(workers) == 2, "address": ", ".join(sorted(workers)) or "none"}}


# --------------------------------------------------------------------------------------------
# Submitting the detector job
# --------------------------------------------------------------------------------------------

def build_app_zip(settings: Settings) -> Path:
    """The project's Python packages the driver and executors import, as one zip for ``--py-files``."""
    out = settings.cluster_dir / "app" / APP_ZIP
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f"{out.stem}.{os.getpid()}.partial")   # a job and its standby submit at once
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for package in SHIPPED_PACKAGES:
            for path in sorted((REPO_ROOT / package).rglob("*.py")):
                archive.write(path, path.relative_to(REPO_ROOT).as_posix())
    partial.replace(out)
    return out


def submit_command(settings: Settings, job_args: list[str]) -> list[str]:
    """``spark-submit`` of the detector job to the cluster's master (client mode: the driver runs here,
    in this venv; the executors run the packed environment ``cluster-up`` built, the code from the zip)."""
    from common.spark import job_jars

    app = build_app_zip(settings)
    environment = executor_env.existing(settings)
    clustered = cluster_settings(settings)
    return [str(spark_home() / "bin" / "spark-submit"),
            "--master", clustered.spark_master,
            "--deploy-mode", "client",
            "--name", "fraud-detectors",
            "--py-files", str(app),
            "--archives", f"{environment}#{executor_env.ENV_DIR_NAME}",
            "--jars", ",".join(str(j) for j in job_jars(settings)),
            "--driver-memory", settings.spark_driver_memory,
            "--executor-memory", settings.cluster_spark_executor_memory,
            "--total-executor-cores", str(2 * settings.cluster_spark_worker_cores),
            "--conf", f"spark.executor.cores={settings.cluster_spark_worker_cores}",
            "--conf", f"spark.pyspark.python={executor_env.EXECUTOR_PYTHON}",
            "--conf", f"spark.pyspark.driver.python={sys.executable}",
            # The Python workers start with `python -m common.pyspark_daemon` (common/spark.py), before any
            # task put the --py-files on their path: the zip, as each executor downloads it into its
            # working folder, is on their PYTHONPATH from the start.
            "--conf", f"spark.executorEnv.PYTHONPATH={APP_ZIP}",
            "--conf", f"spark.driver.host={HOST}",
            str(REPO_ROOT / "spark_job" / "__main__.py"), *job_args]


def submit(settings: Settings, job_args: list[str]) -> None:
    """Replace this process with the ``spark-submit`` of the detector job (its settings in the environment)."""
    cmd = submit_command(settings, job_args)
    env = {**spark_env(settings), **cluster_settings(settings).to_env()}
    print("$ " + " ".join(cmd), flush=True)
    os.execve(cmd[0], cmd, env)


def wipe(settings: Settings) -> None:
    down(settings, log=lambda _m: None)
    shutil.rmtree(settings.cluster_dir, ignore_errors=True)
