#!/bin/sh
# Run vm/ci/grade-fork.sh on this machine exactly as the CI workflows do:
# as root in a fresh Debian 12 container, with /dev/kvm when this host has
# one. Needs docker or podman. Usage: vm/ci/run-local.sh [STAGE]
set -eu
cd "$(dirname "$0")/../.."
engine=$(command -v docker || command -v podman || true)
[ -n "$engine" ] || { echo "run-local: needs docker or podman" >&2; exit 2; }
kvm=""
[ -w /dev/kvm ] && kvm="--device /dev/kvm"
# shellcheck disable=SC2086
exec "$engine" run --rm $kvm -e STAGE="${1:-}" -v "$PWD:/lab" -w /lab debian:bookworm \
	sh -c 'apt-get update -qq && apt-get install -y -qq make sudo >/dev/null && vm/ci/grade-fork.sh'
