"""The embedded local stack: a real Kafka broker (KRaft), Redis and Spark's Kafka connector jars.

No Docker needed. ``python -m deploy up`` fetches what is missing (Maven Central through ``mvn``,
Redis through apt), starts the broker and Redis on 127.0.0.1, waits for them by polling with a
deadline and creates the project's topics. Every download is cached under ``.cache/`` and every
file written at run time (broker data, logs, pid files) under ``.run/``; both are git-ignored.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from common.kafka_clients import describe_endpoint
from common.redis_clients import redis_address
from common.settings import REPO_ROOT, Settings
from common.spark import SPARK_JOB_JVM, job_jar_stamp, spark_job_sources_digest
from common.waiting import wait_until
from deploy.debian import NotInstallable, apt_install
from deploy.private_files import write_private
from deploy.processes import tail_file

DEPLOY_DIR = Path(__file__).resolve().parent
MAVEN_SETTINGS = DEPLOY_DIR / "maven" / "settings.xml"


class StackError(RuntimeError):
    """A problem the user has to fix; the message says what is wrong and what to do."""


# --------------------------------------------------------------------------------------------
# Downloads (cached)
# --------------------------------------------------------------------------------------------

def run_maven(pom: Path, goals: list[str], failure: str) -> None:
    """``mvn`` on ``pom`` with the project's Maven settings; a failure is a ``StackError`` starting with
    ``failure`` and quoting Maven's first errors."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError("Maven (mvn) is not installed: install it (Debian: apt-get install maven) and retry.")
    result = subprocess.run([mvn, "-B", "-q", "-s", str(MAVEN_SETTINGS), "-f", str(pom), *goals],
                            capture_output=True, text=True)
    if result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() if "ERROR" in line][:3]
        raise StackError(f"{failure}: {' '.join(errors) or result.stderr[-500:]}")


def maven_copy_dependencies(pom: Path, out_dir: Path) -> Path:
    """Resolve a pom's runtime dependencies from Maven Central into ``out_dir`` (once)."""
    done = out_dir / ".complete"
    if done.exists():
        return out_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    run_maven(pom, ["org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies",
                    f"-DoutputDirectory={out_dir}", "-DincludeScope=runtime"],
              f"downloading the jars of {pom.relative_to(REPO_ROOT)} failed (is Maven Central reachable?)")
    done.write_text("\n".join(sorted(p.name for p in out_dir.glob("*.jar"))) + "\n")
    return out_dir


def kafka_libs(settings: Settings) -> Path:
    return settings.cache_dir / "kafka" / settings.kafka_version / "libs"


def fetch_kafka(settings: Settings) -> Path:
    pom = DEPLOY_DIR / "maven" / "kafka-broker" / "pom.xml"
    _check_pom_version(pom, "kafka.version", settings.kafka_version)
    return maven_copy_dependencies(pom, kafka_libs(settings))


def fetch_spark_jars(settings: Settings) -> None:
    """The jars the detector job puts on Spark's classpath (``common.spark.job_jars``)."""
    maven_copy_dependencies(DEPLOY_DIR / "maven" / "spark-kafka" / "pom.xml", settings.spark_jars_dir)
    build_spark_job_jar(settings)


def build_spark_job_jar(settings: Settings) -> Path:
    """Build ``spark_job/jvm`` with Maven into ``settings.spark_job_jar`` unless its sources are unchanged."""
    jar = settings.spark_job_jar
    stamp = job_jar_stamp(jar)
    digest = spark_job_sources_digest()
    if jar.exists() and stamp.exists() and stamp.read_text() == digest:
        return jar
    if shutil.which("javac") is None:
        raise StackError(f"building {SPARK_JOB_JVM.relative_to(REPO_ROOT)} needs a Java 17+ JDK, not only a JRE "
                         "(Debian: apt-get install openjdk-17-jdk-headless).")
    jar.parent.mkdir(parents=True, exist_ok=True)
    build_dir = jar.parent / "build"
    shutil.rmtree(build_dir, ignore_errors=True)
    run_maven(SPARK_JOB_JVM / "pom.xml", ["package", f"-Dbuild.dir={build_dir}"],
              f"building {SPARK_JOB_JVM.relative_to(REPO_ROOT)} failed")
    os.replace(build_dir / "fraud-spark-job.jar", jar)
    shutil.rmtree(build_dir, ignore_errors=True)
    stamp.write_text(digest)
    return jar


def _check_pom_version(pom: Path, prop: str, expected: str) -> None:
    if f"<{prop}>{expected}</{prop}>" not in pom.read_text():
        raise StackError(f"{pom.name} does not pin {prop}={expected}; keep the pom and the settings in step.")


def ensure_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise StackError("Java is not installed: the broker and Spark need Java 17+ "
                         "(Debian: apt-get install openjdk-17-jre-headless).")
    return java


def ensure_redis_server() -> str:
    """The machine's redis-server, installed from Debian's packages if it is missing."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        apt_install("redis-server")
    except NotInstallable as error:
        raise StackError(f"redis-server is not installed: {error}; install Redis and retry.") from None
    # Debian's package may start a system service on 6379; ours runs on its own port, so leave it be.
    found = shutil.which("redis-server")
    if found is None:
        raise StackError("redis-server was installed but is not on PATH.")
    return found


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------

@dataclass
class Service:
    name: str
    port: int
    settings: Settings

    @property
    def pid_file(self) -> Path:
        return self.settings.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.settings.run_dir / "logs" / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _alive(pid) else None

    def start(self, cmd: list[str], env: dict[str, str] | None = None) -> int:
        if port_open("127.0.0.1", self.port):
            raise StackError(f"port {self.port} on 127.0.0.1 is already in use by another process, so "
                             f"{self.name} cannot start: stop that process or choose another port "
                             f"(see `python -m deploy settings`).")
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=env, cwd=str(REPO_ROOT))
        self.pid_file.write_text(f"{proc.pid}\n")
        self._proc = proc
        return proc.pid

    def exited_early(self) -> bool:
        proc = getattr(self, "_proc", None)
        return proc is not None and proc.poll() is not None

    def stop(self, timeout: float = 30.0) -> bool:
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        _signal_group(pid, signal.SIGTERM)
        try:
            wait_until(lambda: not _alive(pid), timeout, f"{self.name} to stop", interval=0.1)
        except TimeoutError:
            _signal_group(pid, signal.SIGKILL)
            wait_until(lambda: not _alive(pid), 10, f"{self.name} to die", interval=0.1)
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> bool:
        """SIGKILL: a crash, without the service's own shutdown (the chaos suite's harder faults)."""
        pid = self.pid()
        if pid is None:
            return False
        _signal_group(pid, signal.SIGKILL)
        wait_until(lambda: not _alive(pid), 10, f"{self.name} to die", interval=0.1)
        self.pid_file.unlink(missing_ok=True)
        return True

    def tail(self, lines: int = 15) -> str:
        return tail_file(self.log_file, lines)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as dead.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        return state != "Z"
    except (FileNotFoundError, IndexError):
        return False


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def free_ports(first: int, last: int, width: int = 1, host: str = "127.0.0.1") -> int:
    """The lowest port ``p`` in ``[first, last)`` (steps of ``width``) with ``p .. p + width - 1`` all free.

    Give a server that is stopped and restarted a port *below* the kernel's ephemeral range (Linux:
    32768-60999). Clients that keep reconnecting to a stopped server on an ephemeral-range port are
    eventually handed that very port as their own source port and connect to themselves (TCP
    simultaneous open); the restarted server then fails with "Address already in use" (seen in the
    chaos suite's broker restart on 39092).
    """
    for port in range(first, last, width):
        if not any(port_open(host, p) for p in range(port, port + width)):
            return port
    raise StackError(f"no {width} free consecutive port(s) on {host} between {first} and {last}")


# --------------------------------------------------------------------------------------------
# Kafka
# --------------------------------------------------------------------------------------------

class KafkaBroker(Service):
    """The broker of ``settings``; with ``secure=True`` its client listener is SASL_SSL
    (``deploy/broker_security.py``) and ``client_settings`` carries the credentials clients need."""

    def __init__(self, settings: Settings, secure: bool = False):
        super().__init__("kafka", settings.kafka_port, settings)
        self.secure = secure
        self._secrets = None

    @property
    def security_dir(self) -> Path:
        return self.settings.run_dir / "kafka" / "security"

    def secrets(self):
        """The certificates and passwords of the SASL_SSL listener (generated at first use)."""
        if self._secrets is None:
            from deploy import broker_security
            try:
                self._secrets = broker_security.load_or_create(self.security_dir, self.settings.kafka_host)
            except broker_security.OutdatedSecrets as error:
                raise StackError(f"{error}: `python -m deploy wipe` deletes the broker's data and secrets, "
                                 f"or choose another FRAUD_RUN_DIR.") from None
        return self._secrets

    @property
    def client_settings(self) -> Settings:
        """The settings the stack's own tools use (topics, ACLs, status): when secure, SASL_SSL as the
        admin user, a super user; the components have users of their own (``component_settings``)."""
        if not self.secure:
            return self.settings
        from deploy.broker_security import client_settings
        return client_settings(self.settings, self.secrets())

    def component_settings(self, component: str) -> Settings:
        """The settings of one component (``deploy/acls.py``: producer, detectors, enricher, cases)."""
        if not self.secure:
            return self.settings
        from deploy.broker_security import user_settings
        return user_settings(self.settings, self.secrets(), component)

    @classmethod
    def as_configured(cls, settings: Settings) -> "KafkaBroker":
        """The broker as it was last started from ``settings.run_dir``: secure if its rendered
        configuration has a SASL_SSL listener (so ``status`` talks to it the way it listens)."""
        plain = cls(settings)
        try:
            secure = "SASL_SSL" in plain.config_file.read_text()
        except FileNotFoundError:
            secure = False
        return cls(settings, secure=secure) if secure else plain

    @property
    def data_dir(self) -> Path:
        return self.settings.run_dir / "kafka" / "data"

    @property
    def config_file(self) -> Path:
        return self.settings.run_dir / "kafka" / "server.properties"

    def java_cmd(self, main_class: str, *args: str, heap: str = "256m", tool: bool = False) -> list[str]:
        # A short-lived tool starts faster without the C2 compiler and with the serial collector.
        jvm = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"] if tool else ["-XX:+UseG1GC"]
        return [ensure_java(), f"-Xmx{heap}", *jvm,
                f"-Dlog4j2.configurationFile={DEPLOY_DIR / 'config' / 'kafka-log4j2.properties'}",
                "-cp", str(kafka_libs(self.settings) / "*"), main_class, *args]

    def render_config(self) -> None:
        s = self.settings
        template = (DEPLOY_DIR / "config" / "kafka-server.properties").read_text()
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        protocol, extra = "PLAINTEXT", ""
        if self.secure:
            from deploy.broker_security import server_properties
            protocol, extra = "SASL_SSL", server_properties(self.secrets(), "CLIENT")
        # owner-only from its first byte: a secure broker's holds the keystore and the broker user's passwords
        write_private(self.config_file, template.format(
            host=s.kafka_host, port=s.kafka_port, controller_port=s.local_kafka_controller_port,
            listener_name="CLIENT", protocol=protocol, controller_protocol=protocol, extra=extra,
            data_dir=self.data_dir))

    def format_storage(self) -> None:
        """Format the KRaft log directory once (``kafka.tools.StorageTool``)."""
        users_marker = self.data_dir / ".scram-users"
        if (self.data_dir / "meta.properties").exists():
            wanted = " ".join(self.secrets().users()) if self.secure else ""
            if self.secure and (not users_marker.exists() or users_marker.read_text().strip() != wanted):
                raise StackError(f"the broker data in {self.data_dir} was formatted without the SASL users of "
                                 f"a secure broker ({wanted}): `python -m deploy wipe` deletes it, or choose "
                                 f"another FRAUD_RUN_DIR.")
            return
        cluster_id = random_cluster_id()
        # With controller.quorum.voters the format takes no --standalone.
        args = ["format", "-t", cluster_id, "-c", str(self.config_file)]
        if self.secure:  # SCRAM users go into the metadata log at format time (KIP-900)
            from deploy.broker_security import scram_format_args
            args += scram_format_args(self.secrets())
        # The arguments (passwords among them) go through an owner-only argument file that the java
        # launcher reads itself, so they never show in the process list (/proc/<pid>/cmdline).
        argfile = write_private(self.settings.run_dir / "kafka" / "format.args",
                                "".join(java_argfile_line(a) for a in ["kafka.tools.StorageTool", *args]))
        try:
            cmd = self.java_cmd("kafka.tools.StorageTool", tool=True)
            result = subprocess.run([*cmd[:-1], f"@{argfile}"], capture_output=True, text=True)
        finally:
            argfile.unlink(missing_ok=True)
        if result.returncode != 0:
            raise StackError(f"formatting Kafka storage failed: {result.stdout[-300:]} {result.stderr[-300:]}")
        if self.secure:
            users_marker.write_text(" ".join(self.secrets().users()) + "\n")

    def up(self, timeout: float = 90.0) -> None:
        if broker_ready(self.client_settings):
            return  # ours, or one started from another checkout: either way it answers

        fetch_kafka(self.settings)
        self.render_config()
        self.format_storage()
        heap = self.settings.local_kafka_heap
        self.start(self.java_cmd("kafka.Kafka", str(self.config_file), heap=heap))
        try:
            wait_until(lambda: self.exited_early() or broker_ready(self.client_settings), timeout,
                       "the Kafka broker to answer metadata requests", interval=0.25)
        except TimeoutError:
            self.stop()
            raise StackError(f"the Kafka broker did not become ready in {timeout:.0f} s; "
                             f"its log ({self.log_file}) ends with:\n{self.tail()}") from None
        if self.exited_early():
            self.pid_file.unlink(missing_ok=True)
            raise StackError(f"the Kafka broker exited at start; its log ({self.log_file}) ends with:\n{self.tail()}")


def java_argfile_line(arg: str) -> str:
    """One argument of a java launcher ``@argfile``: quoted, backslashes and quotes escaped."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"\n'


def random_cluster_id() -> str:
    """What ``kafka.tools.StorageTool random-uuid`` prints (Kafka's ``Uuid.randomUuid()``: a random
    UUID, URL-safe base64 without padding, never starting with '-'), without starting a JVM."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


def broker_ready(settings: Settings) -> bool:
    """True when the broker answers a metadata request and has a controller."""
    if not port_open(settings.kafka_host, settings.kafka_port):
        return False
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaConfigurationError, KafkaError

    from common.kafka_clients import kafka_python_config
    try:
        admin = KafkaAdminClient(**kafka_python_config(settings), request_timeout_ms=3000)
    except KafkaConfigurationError:
        raise
    except (KafkaError, OSError):
        return False
    try:
        cluster = admin.describe_cluster()
        return bool(cluster.get("brokers")) and cluster.get("controller_id", -1) != -1
    except (KafkaError, OSError):
        return False
    finally:
        admin.close()


# --------------------------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------------------------

class RedisServer(Service):
    def __init__(self, settings: Settings):
        from redis.connection import parse_url
        params = parse_url(settings.redis_url)
        super().__init__("redis", int(params.get("port", 6379)), settings)
        self.password = settings.redis_password or params.get("password")

    def up(self, timeout: float = 20.0) -> None:
        if redis_ready(self.settings):
            return
        binary = ensure_redis_server()
        data = self.settings.run_dir / "redis"
        data.mkdir(parents=True, exist_ok=True)
        # The append-only file keeps profiles, dedup keys and cases across a restart (as compose does).
        cmd = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "yes",
               "--appendfsync", "everysec", "--dir", str(data), "--daemonize", "no", "--protected-mode", "yes"]
        if self.password:  # from an owner-only file, so it never shows in the process list
            quoted = self.password.replace("\\", "\\\\").replace('"', '\\"')
            conf = write_private(data / "auth.conf", f'requirepass "{quoted}"\n')
            cmd.insert(1, str(conf))  # the config file must come first, before the options
        self.start(cmd)
        try:
            wait_until(lambda: self.exited_early() or redis_ready(self.settings), timeout,
                       "Redis to answer PING", interval=0.1)
        except TimeoutError:
            self.stop()
            raise StackError(f"Redis did not answer PING in {timeout:.0f} s; log:\n{self.tail()}") from None
        if self.exited_early():
            self.pid_file.unlink(missing_ok=True)
            raise StackError(f"redis-server exited at start; its log ends with:\n{self.tail()}")


def redis_ready(settings: Settings) -> bool:
    import redis

    from common.redis_clients import redis_client
    client = redis_client(settings, socket_timeout=1)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


# --------------------------------------------------------------------------------------------
# Prometheus (optional: the stack runs without it)
# --------------------------------------------------------------------------------------------

def ensure_prometheus(settings: Settings) -> str | None:
    """A prometheus binary: the machine's, or Debian's package unpacked into the cache; None when
    neither can be had (no apt-get, or the download failed).

    The package is downloaded and unpacked (``apt-get download``, ``dpkg-deb -x``), not installed: an
    installed package starts a system service listening on every interface, and its binary needs only
    libc."""
    found = shutil.which("prometheus")
    unpacked = settings.cache_dir / "prometheus" / "usr" / "bin" / "prometheus"
    if found or unpacked.exists():
        return found or str(unpacked)
    apt, dpkg_deb = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if apt is None or dpkg_deb is None:
        return None
    downloads = settings.cache_dir / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    attempts = [[apt, "download", "-q", "prometheus"]]
    if os.geteuid() == 0:          # package lists may be missing (a fresh container): refresh them once
        attempts += [[apt, "update", "-q"], [apt, "download", "-q", "prometheus"]]
    for cmd in attempts:
        subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=downloads, stdin=subprocess.DEVNULL)
        debs = sorted(downloads.glob("prometheus_*.deb"))
        if debs:
            result = subprocess.run([dpkg_deb, "-x", str(debs[-1]), str(settings.cache_dir / "prometheus")],
                                    capture_output=True, text=True)
            return str(unpacked) if result.returncode == 0 and unpacked.exists() else None
    return None


def prometheus_config(targets: dict[str, str], scrape_interval: str = "5s") -> str:
    """Prometheus's configuration (JSON is YAML) scraping ``targets`` (job name -> host:port)."""
    import json

    return json.dumps({"global": {"scrape_interval": scrape_interval, "evaluation_interval": "15s"},
                       "scrape_configs": [{"job_name": name, "static_configs": [{"targets": [target]}]}
                                          for name, target in targets.items()]}, indent=2) + "\n"


class PrometheusServer(Service):
    """Prometheus on 127.0.0.1:``FRAUD_PROMETHEUS_PORT`` scraping the local services' ``/metrics``
    (``common.metrics_http.metrics_targets``), its data in ``<run_dir>/prometheus``."""

    def __init__(self, settings: Settings, targets: dict[str, str] | None = None):
        from common.metrics_http import metrics_targets

        super().__init__("prometheus", settings.prometheus_port, settings)
        self.targets = targets if targets is not None else metrics_targets(settings)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def ready(self) -> bool:
        """Prometheus answers on the port ("Prometheus Server is Ready."), not just any HTTP server."""
        import urllib.request

        try:
            with urllib.request.urlopen(self.url + "-/ready", timeout=2) as response:
                return response.status == 200 and b"Prometheus" in response.read(200)
        except OSError:
            return False

    def up(self, timeout: float = 60.0) -> str:
        """Start it (or find it running); one line saying where, or why it is not running."""
        if self.ready():
            return f"Prometheus: running at {self.url}"
        if port_open("127.0.0.1", self.port):
            raise StackError(f"Prometheus: port {self.port} is taken by a server that is not Prometheus "
                             "(set FRAUD_PROMETHEUS_PORT)")
        binary = ensure_prometheus(self.settings)
        if binary is None:
            return ("Prometheus: not installed and cannot be had from Debian's packages here "
                    "(Debian: apt-get install prometheus); the stack runs without it")
        data = self.settings.run_dir / "prometheus"
        (data / "data").mkdir(parents=True, exist_ok=True)
        config = data / "prometheus.yml"
        config.write_text(prometheus_config(self.targets))
        self.start([binary, f"--config.file={config}", f"--storage.tsdb.path={data / 'data'}",
                    "--storage.tsdb.retention.time=2d", f"--web.listen-address=127.0.0.1:{self.port}"])
        try:
            wait_until(lambda: self.exited_early() or self.ready(), timeout, "Prometheus to be ready", interval=0.2)
        except TimeoutError:
            self.stop()
            raise StackError(f"Prometheus was not ready in {timeout:.0f} s; log:\n{self.tail()}") from None
        if self.exited_early():
            self.pid_file.unlink(missing_ok=True)
            raise StackError(f"prometheus exited at start; its log ends with:\n{self.tail()}")
        return f"Prometheus: {self.url} scraping {', '.join(self.targets.values())}"

    def targets_health(self) -> dict[str, str]:
        """Each scrape target's job and health (``/api/v1/targets``): ``{job: "up"|"down"|"unknown"}``."""
        from deploy.prometheus_api import targets_health

        return targets_health(self.url)


# --------------------------------------------------------------------------------------------
# The whole stack
# --------------------------------------------------------------------------------------------

def up(settings: Settings, log=print, secure: bool = False, prometheus: bool = False) -> Settings:
    """Start Redis and the broker (SASL_SSL with ``secure``) and create the topics, and with
    ``prometheus`` a Prometheus scraping the services' metrics when one can be had; return the
    settings clients of this stack use (with the SASL_SSL credentials when secure)."""
    started = time.monotonic()
    ensure_java()
    log("fetching jars (cached after the first run) ...")
    fetch_kafka(settings)
    fetch_spark_jars(settings)
    log(f"starting Redis on {redis_address(settings)} ...")
    RedisServer(settings).up()
    broker = KafkaBroker(settings, secure=secure)
    log(f"starting the Kafka broker on {'SASL_SSL://' if secure else ''}{settings.kafka_bootstrap} ...")
    broker.up()
    client = broker.client_settings
    from deploy.topics import create_project_topics
    created = create_project_topics(client)
    log(f"topics: {', '.join(created) if created else 'all present'}")
    if secure:
        from deploy.acls import apply_acls
        from deploy.broker_security import write_user_envs
        log(f"ACLs: {apply_acls(client, settings)} for the components' users")
        env_files = write_user_envs(settings, broker.secrets())
        log(f"SASL_SSL clients: `set -a; . {broker.security_dir}/<user>.env; set +a` sets the FRAUD_KAFKA_* "
            f"variables of one user ({', '.join(env_files)}; CA {client.kafka_ssl_cafile})")
    if prometheus:
        try:
            log(PrometheusServer(settings).up())
        except StackError as error:    # observability is optional: the stack is up without it
            log(f"Prometheus did not start: {error}")
    log(f"local stack up in {time.monotonic() - started:.1f} s")
    return client


def down(settings: Settings, log=print) -> None:
    for service in (PrometheusServer(settings), KafkaBroker(settings), RedisServer(settings)):
        log(f"{service.name}: {'stopped' if service.stop() else 'not running'}")


def status(settings: Settings) -> dict[str, dict]:
    kafka, redis_server = KafkaBroker.as_configured(settings), RedisServer(settings)
    client = kafka.client_settings
    return {
        "kafka": {"pid": kafka.pid(), "address": describe_endpoint(client), "ready": broker_ready(client)},
        "redis": {"pid": redis_server.pid(), "address": redis_address(settings),
                  "ready": redis_ready(settings)},
        "prometheus": {"pid": PrometheusServer(settings).pid(), "address": PrometheusServer(settings).url,
                       "ready": PrometheusServer(settings).ready()},
        "spark-kafka jars": {"ready": (settings.spark_jars_dir / ".complete").exists(),
                             "address": str(settings.spark_jars_dir), "pid": None},
        "spark job jar": {"ready": settings.spark_job_jar.exists(), "address": str(settings.spark_job_jar), "pid": None},
    }


def wipe(settings: Settings) -> None:
    """Stop the stack and delete its data (not the download cache)."""
    down(settings, log=lambda _msg: None)
    for path in (settings.run_dir / "kafka", settings.run_dir / "redis", settings.run_dir / "prometheus"):
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m deploy up|down|status")
