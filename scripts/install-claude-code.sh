#!/bin/sh
# Install the real Claude Code CLI (the npm package @anthropic-ai/claude-code,
# at a pinned version) under PREFIX, for the end-to-end test in tests/e2e/,
# which drives it offline against a loopback stand-in of its model API.
#
#   sh scripts/install-claude-code.sh PREFIX      # e.g. .venv/claude-code
#
# The binary lands at PREFIX/node_modules/.bin/claude.  Idempotent: nothing is
# done when that binary already reports the pinned version.  npm uses the
# registry the machine is configured for; no host is named here.  A failed
# install is retried twice.  Needs node >= 18 and npm on PATH.
set -eu

# The version the end-to-end test was written and checked against; a newer
# release may change its requests or hook payloads, so it moves on purpose.
VERSION=2.1.197
PACKAGE=@anthropic-ai/claude-code
PREFIX=${1:-.venv/claude-code}
CLAUDE=$PREFIX/node_modules/.bin/claude
PKGDIR=$PREFIX/node_modules/$PACKAGE

say() { printf 'install-claude-code: %s\n' "$*" >&2; }

reports_version() {
    # The binary runs and says "<VERSION> (Claude Code)".
    [ -x "$CLAUDE" ] || return 1
    v=$("$CLAUDE" --version 2>/dev/null | awk '{print $1}') || return 1
    [ "$v" = "$VERSION" ]
}

if reports_version; then
    say "Claude Code $VERSION already at $CLAUDE: nothing to do"; exit 0
fi

node_ok() {
    command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1 &&
        node -e 'process.exit(parseInt(process.versions.node) >= 18 ? 0 : 1)' 2>/dev/null
}
if ! node_ok && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    # A fresh Debian has neither: Debian's nodejs (18 on Debian 12) and npm.
    say "installing Debian's nodejs and npm"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
node_ok || {
    say "node >= 18 and npm are needed to install Claude Code; install them and run make again"
    exit 1; }

mkdir -p "$PREFIX"
tries=0
until
    say "npm install --prefix $PREFIX $PACKAGE@$VERSION"
    npm install --prefix "$PREFIX" --no-audit --no-fund --save-exact --include=optional \
        --loglevel=error "$PACKAGE@$VERSION" >&2
do
    tries=$((tries + 1))
    [ "$tries" -le 2 ] || { say "npm install failed 3 times; giving up"; exit 1; }
    say "npm install failed; retry $tries of 2 in $((tries * 5)) s"
    sleep $((tries * 5))
done

# The package's postinstall copies the platform's native binary over a stub;
# where install scripts are disabled (npm's ignore-scripts) the stub stays.
if ! reports_version && [ -f "$PKGDIR/install.cjs" ]; then
    say "the postinstall did not run: running $PKGDIR/install.cjs"
    (cd "$PKGDIR" && node install.cjs) >&2
fi
reports_version || { say "installed, but $CLAUDE --version does not report $VERSION"; exit 1; }
say "installed Claude Code $VERSION as $CLAUDE"
