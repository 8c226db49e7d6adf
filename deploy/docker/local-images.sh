#!/usr/bin/env bash
# Images for deploy/docker-compose.yml built on this machine, for one without an image registry: a
# Debian bookworm base from debootstrap (base-image.sh), then Python 3.11, a JRE 17 and Maven from
# Debian's packages, Redis from Debian, the Kafka broker from Maven Central as `make fetch` gets it, and
# Prometheus from Debian for the `monitoring` profile (Grafana is not in Debian: compose.sh says so).
# The compose file picks them through the variables of deploy/docker/local-images.env; the project's
# own image is then built by compose from deploy/docker/app.Dockerfile on top of them.
# Docker's layer cache keeps every image: a second run builds nothing.
#
#   deploy/docker/local-images.sh        (make compose-images; needs the engine: make docker-engine)
set -euo pipefail
cd "$(dirname "$0")/../.."
ENV_FILE=deploy/docker/local-images.env
# The engine's classic builder: BuildKit needs the buildx plugin, which this path does not assume.
export DOCKER_BUILDKIT=0
image() { sed -n "s/^$1=//p" "$ENV_FILE"; }

BASE=fraud-local/debian:bookworm
deploy/docker/base-image.sh "$BASE"
build() {   # build <image> <dockerfile>
    local started=$SECONDS
    if ! nice -n 10 docker build -q --force-rm -f "$2" --build-arg "BASE_IMAGE=$BASE" \
            --build-arg "MAVEN_IMAGE=$(image MAVEN_IMAGE)" --build-arg "JRE_IMAGE=$(image JRE_IMAGE)" \
            -t "$1" . > ".cache/docker/build-${1//[\/:]/-}.log" 2>&1; then
        echo "local images: building $1 failed; the end of .cache/docker/build-${1//[\/:]/-}.log:" >&2
        tail -n 15 ".cache/docker/build-${1//[\/:]/-}.log" >&2
        exit 1
    fi
    echo "local images: $1 ($((SECONDS - started)) s)"
}
build "$(image PYTHON_IMAGE)" deploy/docker/local/python.Dockerfile
build "$(image JRE_IMAGE)" deploy/docker/local/jre.Dockerfile
build "$(image MAVEN_IMAGE)" deploy/docker/local/maven.Dockerfile
build "$(image REDIS_IMAGE)" deploy/docker/local/redis.Dockerfile
build "$(image KAFKA_IMAGE)" deploy/docker/local/kafka.Dockerfile
build "$(image PROMETHEUS_IMAGE)" deploy/docker/local/prometheus.Dockerfile
