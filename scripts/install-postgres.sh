#!/bin/sh
# Make PostgreSQL's server programs (initdb, pg_ctl, postgres) available for
# the tests and the benchmark, which start a throwaway server of their own
# (scripts/postgres-server.sh).  Nothing is started or configured here.
#
# Found already (PG_BINDIR, initdb on PATH, or Debian's /usr/lib/postgresql):
# nothing to do.  Otherwise, on Debian as root, Debian's `postgresql` package
# is installed from the machine's own apt sources (no host is named here).
# Elsewhere, install PostgreSQL yourself and set PG_BINDIR if needed.
set -eu

say() { printf 'install-postgres: %s\n' "$*" >&2; }

if [ -n "$(sh "$(dirname "$0")/postgres-server.sh" bindir 2>/dev/null)" ]; then
    say "using $(sh "$(dirname "$0")/postgres-server.sh" bindir)"; exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    say "PostgreSQL's initdb was not found; install PostgreSQL (or set PG_BINDIR)"; exit 1
fi
say "installing Debian's postgresql package"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null 2>&1 || {
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >/dev/null
}
# Debian's package starts a cluster of its own; the tests never use it.
sh "$(dirname "$0")/postgres-server.sh" bindir >/dev/null
