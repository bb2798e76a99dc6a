#!/bin/sh
# install-deps.sh — installs what mpcsim needs to build, test and plot, from Debian packages.
# Idempotent: installs only what is missing.
#   scripts/install-deps.sh              install missing packages (needs root or sudo)
#   scripts/install-deps.sh --if-missing the same, silent when nothing is missing
#   scripts/install-deps.sh --list       print the package list
set -eu

PKGS="build-essential pkg-config libgsl-dev libsqlite3-dev libyaml-dev check gnuplot-nox \
libssl-dev libjansson-dev python3 python3-numpy python3-torch iproute2 file clang libclang-rt-14-dev \
openmpi-bin"

if [ "${1:-}" = "--list" ]; then
    echo "$PKGS"
    exit 0
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    [ "${1:-}" = "--if-missing" ] || echo "install-deps: all packages present"
    exit 0
fi

echo "install-deps: installing:$missing"
if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install-deps: error: not root and no sudo; run as root:" >&2
    echo "  apt-get update && apt-get install -y$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
