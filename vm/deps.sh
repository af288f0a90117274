#!/bin/sh
# Install the Debian packages of the named groups (see vm/packages) plus every
# stage's stages/*/packages, non-interactively; a no-op when all are present.
# Usage: vm/deps.sh GROUP...
set -eu
here=$(dirname "$0")
wanted=""
for group in "$@"; do
	line=$(sed -n "s/^$group:[[:space:]]*//p" "$here/packages")
	[ -n "$line" ] || { echo "vm/deps.sh: unknown package group '$group'" >&2; exit 2; }
	wanted="$wanted $line"
done
for list in "$here"/../stages/*/packages; do
	[ -f "$list" ] && wanted="$wanted $(grep -v '^[[:space:]]*#' "$list" | tr '\n' ' ')"
done
missing=""
for pkg in $wanted; do
	dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null | grep -q '^ii' ||
		case " $missing " in *" $pkg "*) ;; *) missing="$missing $pkg" ;; esac
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	sudo=""
elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
	sudo="sudo -n"
else
	echo "The lab needs these Debian packages, and this user cannot install them:" >&2
	echo "   $missing" >&2
	echo "Ask an administrator to run: apt-get install$missing" >&2
	exit 2
fi
echo "lab: installing Debian packages:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
