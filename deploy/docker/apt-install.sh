#!/usr/bin/env bash
# Install Debian packages when their command is missing, as the local stack does for redis-server:
# only as root with apt-get, else one line saying what to install.
#   deploy/docker/apt-install.sh WHO COMMAND PACKAGE
set -euo pipefail
who=$1 cmd=$2 package=$3
command -v "$cmd" >/dev/null && exit 0
if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "$who: $cmd is not installed and cannot be installed here (Debian: sudo apt-get install $package)" >&2
    exit 1
fi
echo "$who: installing $package from Debian's packages ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "$package" >/dev/null < /dev/null \
    || { echo "$who: apt-get install $package failed" >&2; exit 1; }
command -v "$cmd" >/dev/null || { echo "$who: $package installed but $cmd is not on PATH" >&2; exit 1; }
