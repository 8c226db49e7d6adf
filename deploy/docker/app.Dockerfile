# One image for every Python service of the project (topic init, producers, the Spark detector job,
# the Faust enricher and case manager); deploy/docker-compose.yml picks the command per service.
# The `dashboard` stage adds the dashboard's port, health check and command on top of the same layers.
#
#   docker build -f deploy/docker/app.Dockerfile --target app .        (from the repository root)
#
# Stages: `jars` resolves the Spark Kafka connector and builds the job's jar (spark_job/jvm) with Maven at
# build time (the same poms and Maven settings as the local stack's `python -m deploy fetch`); `jre` only supplies a Temurin JRE 17;
# `app` is Python 3.11 + that JRE + the pinned Python packages + the connector jars + the code.
# Settings reach the containers as FRAUD_* environment variables only (common/settings.py): the
# ones set here are facts of the image's layout; compose sets the connections.
#
# The three base images are build arguments: the official images by default; on a machine without an
# image registry, Debian-built stand-ins with the same layout (deploy/docker/local-images.sh,
# deploy/docker/local-images.env). No `# syntax=` line: the builder's own frontend, nothing to pull.
ARG MAVEN_IMAGE=maven:3.9.9-eclipse-temurin-17
ARG JRE_IMAGE=eclipse-temurin:17.0.15_6-jre-jammy
ARG PYTHON_IMAGE=python:3.11.13-slim-bookworm

# --- the Spark Kafka connector and its runtime dependencies, from Maven Central ----------------------
FROM ${MAVEN_IMAGE} AS jars
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /build
COPY deploy/maven/settings.xml deploy/maven/settings.xml
COPY deploy/maven/spark-kafka/pom.xml deploy/maven/spark-kafka/pom.xml
# The plugin version is pinned as in deploy/local_stack.py; the .complete marker is the local stack's.
RUN mvn -B -q -s deploy/maven/settings.xml -f deploy/maven/spark-kafka/pom.xml \
        org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies \
        -DoutputDirectory=/out/spark-kafka -DincludeScope=runtime \
    && ls /out/spark-kafka/spark-sql-kafka-0-10_2.13-4.0.0.jar \
    && find /out/spark-kafka -name '*.jar' -printf '%f\n' | sort > /out/spark-kafka/.complete
# The detector job's own jar (the contract's validation as a Spark UDF), built as `deploy fetch` does.
COPY spark_job/jvm spark_job/jvm
COPY detectors/operators/java detectors/operators/java
RUN mvn -B -q -s deploy/maven/settings.xml -f spark_job/jvm/pom.xml package -Dbuild.dir=/build/spark-job \
    && mkdir -p /out/spark-job && cp /build/spark-job/fraud-spark-job.jar /out/spark-job/

# --- a Java 17 runtime for Spark (copied whole, so the Python image needs no apt pins) ---------------
FROM ${JRE_IMAGE} AS jre

# --- the services' image -----------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS app
ENV JAVA_HOME=/opt/java/openjdk \
    PATH=/opt/java/openjdk/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=jre /opt/java/openjdk /opt/java/openjdk

# The exact pins of pyproject.toml's dependencies, their dependency tree pinned by constraints.txt.
# Only the dependency list is read here (not the code), so this layer is rebuilt only when it changes.
COPY pyproject.toml deploy/docker/constraints.txt /tmp/deps/
RUN python -c "import tomllib; deps = tomllib.load(open('/tmp/deps/pyproject.toml', 'rb'))['project']['dependencies']; open('/tmp/deps/requirements.txt', 'w').write(chr(10).join(deps) + chr(10))" \
    && pip install --no-cache-dir -r /tmp/deps/requirements.txt -c /tmp/deps/constraints.txt \
    && rm -rf /tmp/deps \
    && java -version

COPY --from=jars /out/spark-kafka /opt/fraud/jars/spark-kafka
COPY --from=jars /out/spark-job /opt/fraud/jars/spark-job

# A non-root user owns only the state directory; the code and the jars stay read-only for it.
RUN groupadd --system --gid 10001 fraud \
    && useradd --system --uid 10001 --gid fraud --home-dir /home/fraud --create-home --shell /usr/sbin/nologin fraud \
    && mkdir -p /var/lib/fraud/run /var/lib/fraud/cache /var/lib/fraud/checkpoints /var/lib/fraud/models \
        /var/lib/fraud/work \
    && chown -R fraud:fraud /var/lib/fraud

WORKDIR /app
COPY common ./common
COPY producers ./producers
COPY detectors ./detectors
COPY spark_job ./spark_job
COPY sinks ./sinks
COPY models ./models
COPY deploy ./deploy

# Paths of the image's layout (named volumes mounted on /var/lib/fraud/* inherit the ownership).
ENV FRAUD_SPARK_JARS_DIR=/opt/fraud/jars/spark-kafka \
    FRAUD_SPARK_JOB_JAR=/opt/fraud/jars/spark-job/fraud-spark-job.jar \
    FRAUD_RUN_DIR=/var/lib/fraud/run \
    FRAUD_CACHE_DIR=/var/lib/fraud/cache \
    FRAUD_CHECKPOINT_ROOT=/var/lib/fraud/checkpoints \
    FRAUD_MODEL_REGISTRY=/var/lib/fraud/models

# By number, so the host and Kubernetes' runAsNonRoot can check it without /etc/passwd.
USER 10001:10001
# The services run in a folder of their own: Spark creates its session artifacts (artifacts/spark-*)
# under the working directory, and the code's folder is read-only for the user.
WORKDIR /var/lib/fraud/work
# Each service's probe differs (python -m spark_job.health, sinks.health): the compose file sets it.
# The dashboard stage has its own.
HEALTHCHECK NONE
# Harmless default: print every setting as the container sees it. Compose gives each service its command.
CMD ["python", "-m", "deploy", "settings"]

# --- the dashboard: same layers plus its port and health check ---------------------------------------
FROM app AS dashboard
ENV FRAUD_DASHBOARD_HOST=0.0.0.0 \
    FRAUD_DASHBOARD_PORT=8765
EXPOSE 8765
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('FRAUD_DASHBOARD_PORT', '8765'), timeout=4).read()"]
CMD ["python", "-m", "sinks.dashboard"]
