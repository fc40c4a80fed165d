#!/usr/bin/env bash
# The jail's system dependencies: Debian's bubblewrap (/usr/bin/bwrap) and libseccomp
# (libseccomp.so.2, which compiles the jail's seccomp filter through the pyseccomp binding).
# Every run of a student's code goes through them (grader_tests/jail.py). Idempotent: does
# nothing when both are there. Run by `make demo`, `make test` and .ci/run; without root and
# sudo it says what to install and fails, since no student code may run without the jail.
set -euo pipefail
has_libseccomp() {
    /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || ls /usr/lib/*/libseccomp.so.2 >/dev/null 2>&1
}
if command -v bwrap >/dev/null 2>&1 && has_libseccomp; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    SUDO=
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
else
    echo "install_jail: bubblewrap or libseccomp is missing; install them as root:" \
         "apt-get install bubblewrap libseccomp2" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install_jail: bubblewrap or libseccomp is missing and this is not a Debian/Ubuntu" \
         "system: install your distribution's bubblewrap and libseccomp packages" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq bubblewrap libseccomp2 >/dev/null
echo "install_jail: installed $(bwrap --version)"
