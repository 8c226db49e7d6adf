#!/usr/bin/env bash
# The Debian base of the locally built images, for machines that reach Debian's mirrors but no image
# registry: a minimal bookworm root file system made by debootstrap, imported with `docker import`.
# The tarball is cached (.cache/docker/), so only the first run downloads (~40 MB, a few minutes).
#
#   deploy/docker/base-image.sh [IMAGE]        (default fraud-local/debian:bookworm; root, debootstrap)
#   EXTRA_CA_DIR: CA certificates to trust besides Debian's (default /usr/local/share/ca-certificates)
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE=${1:-fraud-local/debian:bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
TARBALL=.cache/docker/debian-bookworm-minbase.tar
EXTRA_CA_DIR=${EXTRA_CA_DIR:-/usr/local/share/ca-certificates}

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "base image: $IMAGE exists"
    exit 0
fi
if [[ ! -f $TARBALL ]]; then
    [[ $(id -u) == 0 ]] || { echo "base image: debootstrap needs root" >&2; exit 1; }
    deploy/docker/apt-install.sh "base image" debootstrap debootstrap
    mkdir -p .cache/docker
    rootfs=$(mktemp -d /tmp/fraud-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    echo "base image: debootstrap bookworm (minbase) from $MIRROR ..."
    nice -n 10 debootstrap --variant=minbase bookworm "$rootfs" "$MIRROR" > .cache/docker/debootstrap.log 2>&1 \
        || { echo "base image: debootstrap failed; the end of .cache/docker/debootstrap.log:" >&2; tail -n 5 .cache/docker/debootstrap.log >&2; exit 1; }
    cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
SOURCES
    # As Debian's own images: no recommends, no docs, no apt lists left in the image.
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' > "$rootfs/etc/apt/apt.conf.d/90no-recommends"
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb
    tar --numeric-owner -C "$rootfs" -cf "$TARBALL.partial" .
    mv "$TARBALL.partial" "$TARBALL"
fi
docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' "$TARBALL" "$IMAGE-rootfs" >/dev/null
echo "base image: imported $IMAGE-rootfs from $TARBALL ($(du -h "$TARBALL" | cut -f1))"
# This machine's own CA certificates (e.g. of a TLS-inspecting egress proxy) go where Debian's
# update-ca-certificates finds them, so apt's ca-certificates, Java's store and pip trust them too.
ctx=$(mktemp -d /tmp/fraud-ca.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
certs=("$EXTRA_CA_DIR"/*.crt)
[[ -e ${certs[0]} ]] && cp "${certs[@]}" "$ctx/" || certs=()
printf 'FROM %s\nCOPY . /usr/local/share/ca-certificates/\n' "$IMAGE-rootfs" > "$ctx/Dockerfile"
echo Dockerfile > "$ctx/.dockerignore"
DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" "$ctx" >.cache/docker/base-image.log 2>&1 \
    || { echo "base image: adding the CA certificates failed:" >&2; tail -n 5 .cache/docker/base-image.log >&2; exit 1; }
echo "base image: $IMAGE with ${#certs[@]} CA certificate(s) of this machine from $EXTRA_CA_DIR"
