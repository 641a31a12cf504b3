#!/bin/sh
# A throwaway PostgreSQL server in a folder, listening only on a Unix socket
# in that folder.  Used by the test suite (tests/pg.py, a pytest session
# fixture) and the benchmark; handy by hand:
#
#   sh scripts/postgres-server.sh start DIR [fast]   # prints the URL
#   sh scripts/postgres-server.sh stop DIR
#   sh scripts/postgres-server.sh bindir              # where initdb is
#
# `fast` turns fsync off (tests: nothing must survive a power cut).  The
# server runs as an unprivileged user: as root, Debian's `postgres` system
# user (root cannot run postgres), else the caller.  It listens on no TCP
# port; the socket's folder can be entered by anyone (so a test process that
# dropped root's powers still connects), and the database superuser,
# `durability`, logs in with a random password that is only in the URL
# printed (and in DIR/password, readable by the server's user).
set -eu

bindir() {
    if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then echo "$PG_BINDIR"; return; fi
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ]; then echo "$d"; return; fi
    done
    p=$(command -v initdb 2>/dev/null) && { dirname "$p"; return; }
    return 1
}

as_server() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u "${PG_SERVER_USER:-postgres}" -- "$@"
    else
        "$@"
    fi
}

cmd=${1:-}; dir=${2:-}
case "$cmd" in
bindir)
    bindir ;;
start)
    [ -n "$dir" ] || { echo "usage: $0 start DIR [fast]" >&2; exit 2; }
    bin=$(bindir) || { echo "postgres-server: PostgreSQL's initdb not found (run scripts/install-postgres.sh)" >&2; exit 1; }
    if [ "$(id -u)" = 0 ]; then
        id "${PG_SERVER_USER:-postgres}" >/dev/null 2>&1 || \
            useradd --system --no-create-home --shell /usr/sbin/nologin "${PG_SERVER_USER:-postgres}"
    fi
    mkdir -p "$dir"
    chmod 711 "$dir"
    [ "$(id -u)" = 0 ] && chown "${PG_SERVER_USER:-postgres}" "$dir"
    dir=$(cd "$dir" && pwd)
    password=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    (umask 077; printf '%s\n' "$password" >"$dir/password")
    [ "$(id -u)" = 0 ] && chown "${PG_SERVER_USER:-postgres}" "$dir/password"
    as_server "$bin/initdb" -D "$dir/data" -U durability --pwfile="$dir/password" \
        --auth=scram-sha-256 -E UTF8 --locale=C \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    opts="-c listen_addresses= -c unix_socket_directories=$dir -c max_connections=200"
    [ "${3:-}" = fast ] && opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    as_server "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 -o "$opts" start \
        >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgresql://durability:$password@/postgres?host=$dir"
    ;;
stop)
    [ -n "$dir" ] || { echo "usage: $0 stop DIR" >&2; exit 2; }
    bin=$(bindir)
    [ -f "$dir/data/postmaster.pid" ] && as_server "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 start DIR [fast] | stop DIR | bindir" >&2; exit 2 ;;
esac
