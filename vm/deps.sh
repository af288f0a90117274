#!/bin/sh
# Install the Debian packages of the named groups (see vm/packages), then
# those every stage's declaration needs (its `packages`, and what its
# machine needs: another architecture's QEMU and compiler, OVMF, mkfs),
# non-interactively; a no-op when all are present.
# Usage: vm/deps.sh GROUP...
set -eu
here=$(dirname "$0")
# install PACKAGE...: apt-get install those of them that are missing.
install() {
	# One dpkg-query for all of them: a student pays for this on every make.
	installed=" $(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "$@" 2>/dev/null |
		awk '$1 == "ii" { printf "%s ", $2 }') "
	missing=""
	for pkg in "$@"; do
		case "$installed $missing " in *" $pkg "*) ;; *) missing="$missing $pkg" ;; esac
	done
	[ -z "$missing" ] && return 0
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
	if [ -z "$updated" ]; then
		$sudo apt-get update -qq
		updated=1
	fi
	# shellcheck disable=SC2086
	$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

updated=""
wanted=""
for group in "$@"; do
	line=$(sed -n "s/^$group:[[:space:]]*//p" "$here/packages")
	[ -n "$line" ] || { echo "vm/deps.sh: unknown package group '$group'" >&2; exit 2; }
	wanted="$wanted $line"
done
# shellcheck disable=SC2086
install $wanted
# Then what the stages declare, read by the lab with the python3 the groups
# above bring: Debian's, as the Makefile runs it (a python3 first on PATH
# may be a version manager's shim that takes longer to start than the rest
# of this script).
python=/usr/bin/python3
[ -x "$python" ] || python=$(command -v python3 || true)
if [ -n "$python" ]; then
	stage_packages=$(PYTHONPATH="$here" "$python" -m lab packages) || exit 2
	# shellcheck disable=SC2086
	install $stage_packages
fi
