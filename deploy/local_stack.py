"""The embedded local stack: a real Kafka broker (KRaft), Redis and Spark's Kafka connector jars.

No Docker needed. ``python -m deploy up`` fetches what is missing (Maven Central through ``mvn``,
Redis through apt), starts the broker and Redis on 127.0.0.1, waits for them by polling with a
deadline and creates the project's topics. Every download is cached under ``.cache/`` and every
file written at run time (broker data, logs, pid files) under ``.run/``; both are git-ignored.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from common.settings import REPO_ROOT, Settings
from common.waiting import wait_until
from deploy.processes import tail_file

DEPLOY_DIR = Path(__file__).resolve().parent
MAVEN_SETTINGS = DEPLOY_DIR / "maven" / "settings.xml"


class StackError(RuntimeError):
    """A problem the user has to fix; the message says what is wrong and what to do."""


# --------------------------------------------------------------------------------------------
# Downloads (cached)
# --------------------------------------------------------------------------------------------

def maven_copy_dependencies(pom: Path, out_dir: Path) -> Path:
    """Resolve a pom's runtime dependencies from Maven Central into ``out_dir`` (once)."""
    done = out_dir / ".complete"
    if done.exists():
        return out_dir
    mvn = shutil.which("mvn")
    if mvn is None:
        raise StackError("Maven (mvn) is not installed: install it (Debian: apt-get install maven) and retry.")
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [mvn, "-B", "-q", "-s", str(MAVEN_SETTINGS), "-f", str(pom),
           "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies",
           f"-DoutputDirectory={out_dir}", "-DincludeScope=runtime"]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() if "ERROR" in line][:3]
        raise StackError(f"downloading the jars of {pom.relative_to(REPO_ROOT)} failed "
                         f"(is Maven Central reachable?): {' '.join(errors) or result.stderr[-500:]}")
    done.write_text("\n".join(sorted(p.name for p in out_dir.glob("*.jar"))) + "\n")
    return out_dir


def kafka_libs(settings: Settings) -> Path:
    return settings.cache_dir / "kafka" / settings.kafka_version / "libs"


def fetch_kafka(settings: Settings) -> Path:
    pom = DEPLOY_DIR / "maven" / "kafka-broker" / "pom.xml"
    _check_pom_version(pom, "kafka.version", settings.kafka_version)
    return maven_copy_dependencies(pom, kafka_libs(settings))


def fetch_spark_kafka_jars(settings: Settings) -> Path:
    return maven_copy_dependencies(DEPLOY_DIR / "maven" / "spark-kafka" / "pom.xml", settings.spark_jars_dir)


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
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise StackError("redis-server is not installed and cannot be installed automatically here: "
                         "install Redis (Debian: sudo apt-get install redis-server) and retry.")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in ([apt, "update", "-q"], [apt, "install", "-y", "-q", "--no-install-recommends", "redis-server"]):
        result = subprocess.run(cmd, capture_output=True, text=True, env=env, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            raise StackError(f"installing redis-server failed ({' '.join(cmd[1:3])}): {result.stderr[-400:]}")
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


# --------------------------------------------------------------------------------------------
# Kafka
# --------------------------------------------------------------------------------------------

class KafkaBroker(Service):
    def __init__(self, settings: Settings):
        super().__init__("kafka", settings.kafka_port, settings)

    @property
    def data_dir(self) -> Path:
        return self.settings.run_dir / "kafka" / "data"

    @property
    def config_file(self) -> Path:
        return self.settings.run_dir / "kafka" / "server.properties"

    def java_cmd(self, main_class: str, *args: str, heap: str = "256m") -> list[str]:
        return [ensure_java(), f"-Xmx{heap}", "-XX:+UseG1GC",
                f"-Dlog4j2.configurationFile={DEPLOY_DIR / 'config' / 'kafka-log4j2.properties'}",
                "-cp", str(kafka_libs(self.settings) / "*"), main_class, *args]

    def render_config(self) -> None:
        s = self.settings
        template = (DEPLOY_DIR / "config" / "kafka-server.properties").read_text()
        self.config_file.parent.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(template.format(
            host=s.kafka_host, port=s.kafka_port, controller_port=s.local_kafka_controller_port,
            listener_name="CLIENT", protocol="PLAINTEXT", extra="", data_dir=self.data_dir))

    def format_storage(self) -> None:
        """Format the KRaft log directory once (``kafka.tools.StorageTool``)."""
        if (self.data_dir / "meta.properties").exists():
            return
        uuid = subprocess.run(self.java_cmd("kafka.tools.StorageTool", "random-uuid"),
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        # With controller.quorum.voters the format takes no --standalone.
        result = subprocess.run(self.java_cmd("kafka.tools.StorageTool", "format", "-t", uuid,
                                              "-c", str(self.config_file)), capture_output=True, text=True)
        if result.returncode != 0:
            raise StackError(f"formatting Kafka storage failed: {result.stdout[-300:]} {result.stderr[-300:]}")

    def up(self, timeout: float = 90.0) -> None:
        if broker_ready(self.settings):
            return  # ours, or one started from another checkout: either way it answers

        fetch_kafka(self.settings)
        self.render_config()
        self.format_storage()
        heap = self.settings.local_kafka_heap
        self.start(self.java_cmd("kafka.Kafka", str(self.config_file), heap=heap))
        try:
            wait_until(lambda: self.exited_early() or broker_ready(self.settings), timeout,
                       "the Kafka broker to answer metadata requests", interval=0.25)
        except TimeoutError:
            self.stop()
            raise StackError(f"the Kafka broker did not become ready in {timeout:.0f} s; "
                             f"its log ({self.log_file}) ends with:\n{self.tail()}") from None
        if self.exited_early():
            self.pid_file.unlink(missing_ok=True)
            raise StackError(f"the Kafka broker exited at start; its log ({self.log_file}) ends with:\n{self.tail()}")


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
        self.password = params.get("password")

    def up(self, timeout: float = 20.0) -> None:
        if redis_ready(self.settings):
            return
        binary = ensure_redis_server()
        data = self.settings.run_dir / "redis"
        data.mkdir(parents=True, exist_ok=True)
        cmd = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
               "--dir", str(data), "--daemonize", "no", "--protected-mode", "yes"]
        if self.password:
            cmd += ["--requirepass", self.password]
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
    try:
        return bool(redis.Redis.from_url(settings.redis_url, socket_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


# --------------------------------------------------------------------------------------------
# The whole stack
# --------------------------------------------------------------------------------------------

def up(settings: Settings, log=print) -> None:
    started = time.monotonic()
    ensure_java()
    log("fetching jars (cached after the first run) ...")
    fetch_kafka(settings)
    fetch_spark_kafka_jars(settings)
    log(f"starting Redis on {settings.redis_url.split('@')[-1]} ...")
    RedisServer(settings).up()
    log(f"starting the Kafka broker on {settings.kafka_bootstrap} ...")
    KafkaBroker(settings).up()
    from deploy.topics import create_project_topics
    created = create_project_topics(settings)
    log(f"topics: {', '.join(created) if created else 'all present'}")
    log(f"local stack up in {time.monotonic() - started:.1f} s")


def down(settings: Settings, log=print) -> None:
    for service in (KafkaBroker(settings), RedisServer(settings)):
        log(f"{service.name}: {'stopped' if service.stop() else 'not running'}")


def status(settings: Settings) -> dict[str, dict]:
    kafka, redis_server = KafkaBroker(settings), RedisServer(settings)
    return {
        "kafka": {"pid": kafka.pid(), "address": settings.kafka_bootstrap, "ready": broker_ready(settings)},
        "redis": {"pid": redis_server.pid(), "address": settings.redis_url.split("@")[-1],
                  "ready": redis_ready(settings)},
        "spark-kafka jars": {"ready": (settings.spark_jars_dir / ".complete").exists(),
                             "address": str(settings.spark_jars_dir), "pid": None},
    }


def wipe(settings: Settings) -> None:
    """Stop the stack and delete its data (not the download cache)."""
    down(settings, log=lambda _msg: None)
    for path in (settings.run_dir / "kafka", settings.run_dir / "redis"):
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m deploy up|down|status")
