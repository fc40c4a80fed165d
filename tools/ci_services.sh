#!/usr/bin/env bash
# What tests/test_batch_distributed.py needs on a machine, installed when missing:
# PostgreSQL's server binaries (initdb, pg_ctl: Debian's postgresql package). The test
# starts its own PostgreSQL server and Dask cluster on loopback, in temporary folders,
# and stops them (tests/services.py), so nothing is left running here. Dask and psycopg
# come with the kit's Python dependencies (pyproject.toml).
#
# Idempotent: when the binaries are on PATH or under /usr/lib/postgresql/*/bin it only
# says where they are. Run as root (CI runs as root); called by .ci/run.
set -euo pipefail

find_pg_bin() {
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v initdb)")"
        return 0
    fi
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

if ! bin=$(find_pg_bin); then
    if [ "$(id -u)" -ne 0 ]; then
        echo "ci_services: PostgreSQL is not installed and this is not root:" \
             "run 'apt-get install -y postgresql' as root" >&2
        exit 1
    fi
    echo "ci_services: installing Debian's postgresql (initdb, pg_ctl)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq postgresql >/dev/null
    bin=$(find_pg_bin) || { echo "ci_services: postgresql installed but no initdb found" >&2; exit 1; }
fi
# As root the tests run the server as the postgres user, which the package creates.
if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
    echo "ci_services: the postgres user is missing (reinstall postgresql-common)" >&2
    exit 1
fi
echo "ci_services: PostgreSQL server binaries in $bin"
