#!/usr/bin/env bash
# The jail's one system dependency: Debian's bubblewrap (/usr/bin/bwrap). Every run of a
# student's code goes through it (grader_tests/jail.py). Idempotent: does nothing when bwrap
# is there. Run by `make demo`, `make test` and .ci/run; without root and sudo it says what
# to install and fails, since no student code may run without the jail.
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
else
    echo "install_jail: bubblewrap is missing; install it as root: apt-get install bubblewrap" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_jail: bubblewrap is missing and this is not a Debian/Ubuntu system:" \
         "install your distribution's bubblewrap package" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq bubblewrap >/dev/null
echo "install_jail: installed $(bwrap --version)"
