#!/usr/bin/env bash
# The Docker engine for the compose targets: `start` starts dockerd when none answers (as root; one
# line saying why not otherwise) and records that it did, `stop` stops only a dockerd that `start`
# started, `status` says which. Used by `make docker-engine` and the compose targets.
#
#   deploy/docker/engine.sh start|stop|status        (RUN_DIR: where the pid and log go, default .run/docker)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN_DIR=${RUN_DIR:-.run/docker}
PIDFILE=$RUN_DIR/dockerd.pid            # exists only while a dockerd started here runs
LOG=$RUN_DIR/dockerd.log
SOCKET=/var/run/docker.sock

answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
ours() { [[ -f $PIDFILE ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

start() {
    if answers; then
        echo "docker engine: running ($(docker version --format '{{.Server.Version}}')$(ours && echo ', started by make docker-engine'))"
        return 0
    fi
    [[ $(id -u) == 0 ]] || { echo "docker engine: not running, and starting dockerd needs root (start it yourself: sudo dockerd, or Docker Desktop)" >&2; exit 1; }
    deploy/docker/apt-install.sh "docker engine" dockerd docker.io
    mkdir -p "$RUN_DIR"
    # Only the unix socket: no TCP listener. setsid: not in make's process group, so ^C of a test keeps it.
    setsid dockerd --host "unix://$SOCKET" --storage-driver overlay2 --pidfile "$RUN_DIR/dockerd.daemon.pid" \
        >"$LOG" 2>&1 < /dev/null &
    echo $! > "$PIDFILE"
    for _ in $(seq 1 120); do
        if answers; then
            echo "docker engine: started dockerd $(docker version --format '{{.Server.Version}}') (pid $(cat "$PIDFILE"), log $LOG)"
            return 0
        fi
        ours || break
        sleep 0.5
    done
    echo "docker engine: dockerd did not answer on $SOCKET; the end of $LOG:" >&2
    tail -n 5 "$LOG" >&2
    exit 1
}

stop() {
    if ! ours; then
        rm -f "$PIDFILE"
        echo "docker engine: not started by make docker-engine, left alone"
        return 0
    fi
    local pid; pid=$(cat "$PIDFILE")
    kill -TERM "$pid"
    for _ in $(seq 1 120); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$PIDFILE"; echo "docker engine: stopped dockerd (pid $pid)"; return 0; }
        sleep 0.5
    done
    echo "docker engine: dockerd (pid $pid) still runs after 60 s; see $LOG" >&2
    exit 1
}

status() {
    if answers; then
        echo "docker engine: running ($(docker version --format '{{.Server.Version}}'))$(ours && echo ', started by make docker-engine')"
    else
        echo "docker engine: not running"
    fi
}

case "${1:-}" in
    start|stop|status) "$1" ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
