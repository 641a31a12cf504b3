#!/bin/sh
# Install the real Codex CLI (@openai/codex) and Gemini CLI
# (@google/gemini-cli), at pinned versions, under PREFIX, for the end-to-end
# tests in tests/e2e/, which drive them offline against loopback stand-ins of
# their model APIs (tests/e2e/fake_openai.py, tests/e2e/fake_gemini.py).
#
#   sh scripts/install-agent-clis.sh PREFIX      # e.g. .venv/agent-clis
#
# The binaries land at PREFIX/node_modules/.bin/codex and .../gemini.
# Idempotent: nothing is done when both already report the pinned versions.
# npm uses the registry the machine is configured for; no host is named here.
# A failed install is retried twice.  Needs node >= 20 and npm on PATH
# (gemini-cli's engines field says >= 20).
#
# Codex is a Rust binary shipped as an optional dependency per platform
# (@openai/codex-linux-x64 and friends, aliases of the same package at
# VERSION-linux-x64); `--include=optional` keeps npm from dropping it, and the
# check below runs it, so a missing native binary fails here, not in a test.
set -eu

# The versions the end-to-end tests were written and checked against; a newer
# release may change its requests, events or hook payloads, so they move on
# purpose (and docs/explanation/session-formats.md with them).
CODEX_VERSION=0.171.0
GEMINI_VERSION=0.61.0
PREFIX=${1:-.venv/agent-clis}
CODEX=$PREFIX/node_modules/.bin/codex
GEMINI=$PREFIX/node_modules/.bin/gemini

say() { printf 'install-agent-clis: %s\n' "$*" >&2; }

codex_ok() {
    # "codex-cli 0.171.0"
    [ -x "$CODEX" ] || return 1
    v=$("$CODEX" --version 2>/dev/null | awk '{print $NF}') || return 1
    [ "$v" = "$CODEX_VERSION" ]
}
gemini_ok() {
    # "0.61.0"
    [ -x "$GEMINI" ] || return 1
    v=$(HOME=${TMPDIR:-/tmp} "$GEMINI" --version 2>/dev/null | tail -n 1) || return 1
    [ "$v" = "$GEMINI_VERSION" ]
}

if codex_ok && gemini_ok; then
    say "codex $CODEX_VERSION and gemini $GEMINI_VERSION already under $PREFIX: nothing to do"
    exit 0
fi

node_ok() {
    command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 &&
        node -e 'process.exit(parseInt(process.versions.node) >= 20 ? 0 : 1)' 2>/dev/null
}
if ! node_ok && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's nodejs and npm"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
node_ok || {
    say "node >= 20 and npm are needed to install the Codex and Gemini CLIs; install them and run make again"
    exit 1; }

mkdir -p "$PREFIX"
tries=0
until
    say "npm install --prefix $PREFIX @openai/codex@$CODEX_VERSION @google/gemini-cli@$GEMINI_VERSION"
    npm install --prefix "$PREFIX" --no-audit --no-fund --save-exact --include=optional \
        --loglevel=error "@openai/codex@$CODEX_VERSION" \
        "@google/gemini-cli@$GEMINI_VERSION" >&2
do
    tries=$((tries + 1))
    [ "$tries" -le 2 ] || { say "npm install failed 3 times; giving up"; exit 1; }
    say "npm install failed; retry $tries of 2 in $((tries * 5)) s"
    sleep $((tries * 5))
done

codex_ok || {
    say "installed, but $CODEX --version does not report $CODEX_VERSION (is the native binary for $(uname -m) there?)"
    exit 1; }
gemini_ok || { say "installed, but $GEMINI --version does not report $GEMINI_VERSION"; exit 1; }
say "installed codex $CODEX_VERSION as $CODEX and gemini $GEMINI_VERSION as $GEMINI"
