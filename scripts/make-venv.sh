#!/bin/sh
# Create the project's virtual environment.  Debian's python3 ships without
# ensurepip unless python3-venv is installed; as root we install it, else we
# say what is missing.
set -eu
PY=${1:-python3}
VENV=${2:-.venv}
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || {
    echo "make-venv: $PY is missing or older than 3.11; run make PY=python3.12 (or newer)" >&2
    exit 1; }
[ -x "$VENV/bin/python" ] && "$VENV/bin/python" -m pip --version >/dev/null 2>&1 && exit 0
rm -rf "$VENV"
if "$PY" -m venv "$VENV" 2>/dev/null; then exit 0; fi
rm -rf "$VENV"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
    echo "make-venv: installing python$ver-venv (Debian ships venv without ensurepip)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "python$ver-venv" >/dev/null \
        || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    "$PY" -m venv "$VENV"
    exit 0
fi
echo "make-venv: '$PY -m venv' failed; install your distribution's python3-venv package" >&2
exit 1
