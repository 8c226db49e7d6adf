#!/usr/bin/env bash
# Docker Compose v2 for a docker CLI that has none: the plugin built from its Go module
# (github.com/docker/compose/v2, pinned below) into .cache/docker/cli-plugins/, used through
# DOCKER_CONFIG=.cache/docker by deploy/docker/compose.sh. Needs Go and the Go module proxy; the first
# build takes about 5 minutes on 2 cores, later runs find the binary.
#
#   deploy/docker/compose-plugin.sh        (prints nothing when `docker compose` already works)
set -euo pipefail
cd "$(dirname "$0")/../.."
VERSION=v2.40.3
PLUGIN=.cache/docker/cli-plugins/docker-compose

docker compose version >/dev/null 2>&1 && exit 0
if [[ -x $PLUGIN ]] && "$PLUGIN" version 2>/dev/null | grep -q "$VERSION"; then
    exit 0
fi
command -v go >/dev/null || { echo "compose plugin: \`docker compose\` is missing and Go is not installed to build it (install Docker Compose v2, or Go)" >&2; exit 1; }
echo "compose plugin: building docker compose $VERSION from its Go module (once; a few minutes) ..."
mkdir -p "$(dirname "$PLUGIN")"
LOG=.cache/docker/compose-plugin.log
dir=$(go mod download -json "github.com/docker/compose/v2@$VERSION" 2>"$LOG" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[[ -d $dir ]] || { echo "compose plugin: downloading github.com/docker/compose/v2@$VERSION failed (Go module proxy?): $(tail -n 2 "$LOG")" >&2; exit 1; }
(cd "$dir" && nice -n 10 go build -trimpath -ldflags "-w -X github.com/docker/compose/v2/internal.Version=$VERSION" \
    -o "$OLDPWD/$PLUGIN.partial" ./cmd) >>"$LOG" 2>&1 \
    || { echo "compose plugin: building failed; the end of $LOG:" >&2; tail -n 5 "$LOG" >&2; exit 1; }
mv "$PLUGIN.partial" "$PLUGIN"
echo "compose plugin: $("$PLUGIN" version) in $PLUGIN"
