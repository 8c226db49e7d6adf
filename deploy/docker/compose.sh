#!/usr/bin/env bash
# `docker compose -f deploy/docker-compose.yml "$@"` as the make targets and the end-to-end suite run
# it: with the compose plugin of compose-plugin.sh when the CLI has none, and with the locally built
# images (local-images.env) when COMPOSE_IMAGES=local, or =auto (the default) and the official images
# are neither here nor pullable (no registry answers).
#
#   deploy/docker/compose.sh which-images  which images: prints `official` or `local`
#   deploy/docker/compose.sh ARGS...       docker compose -f deploy/docker-compose.yml [--env-file …] ARGS...
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! docker compose version >/dev/null 2>&1; then
    export DOCKER_CONFIG=$PWD/.cache/docker      # holds cli-plugins/docker-compose (compose-plugin.sh)
fi

images() {
    case ${COMPOSE_IMAGES:-auto} in
        official|local) echo "$COMPOSE_IMAGES" ;;
        auto)
            if docker image inspect apache/kafka:4.1.1 redis:7.4.2-bookworm >/dev/null 2>&1 \
                || [[ $(curl -s -m 5 -o /dev/null -w '%{http_code}' https://registry-1.docker.io/v2/ || true) == 401 ]]; then
                echo official
            else
                echo local
            fi ;;
        *) echo "COMPOSE_IMAGES=$COMPOSE_IMAGES: choose official, local or auto" >&2; exit 2 ;;
    esac
}

if [[ ${1:-} == which-images ]]; then
    images
    exit 0
fi
args=(-f deploy/docker-compose.yml)
if [[ $(images) == local ]]; then
    args+=(--env-file deploy/docker/local-images.env)
    export DOCKER_BUILDKIT=0             # the engine's own builder: no buildx plugin, nothing to pull
    # Grafana is not in Debian (and its Go module is AGPL: not built here): without its pinned image the
    # monitoring profile runs Prometheus alone (the `prometheus` profile), saying so in one line.
    grafana=$(sed -n 's/.*image: ${GRAFANA_IMAGE:-\(.*\)}$/\1/p' deploy/docker-compose.yml)
    if [[ " $* ${COMPOSE_PROFILES:-} " =~ [\ ,=]monitoring[\ ,] ]] && ! docker image inspect "${GRAFANA_IMAGE:-$grafana}" >/dev/null 2>&1; then
        echo "monitoring: no image registry and no ${GRAFANA_IMAGE:-$grafana} here: running Prometheus without Grafana (http://127.0.0.1:${PROMETHEUS_HOST_PORT:-19090}/)" >&2
        set -- "${@/#monitoring/prometheus}"
        set -- "${@/#--profile=monitoring/--profile=prometheus}"
        [[ -n ${COMPOSE_PROFILES:-} ]] && export COMPOSE_PROFILES=${COMPOSE_PROFILES//monitoring/prometheus}
    fi
fi
exec docker compose "${args[@]}" "$@"
