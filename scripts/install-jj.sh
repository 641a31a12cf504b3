#!/bin/sh
# Make a jj (Jujutsu) >= 0.30 available as $VENV/bin/jj.
#
# A jj the user already has (DURABILITY_JJ, or jj on PATH) always wins: then
# this script does nothing.  Otherwise, on Debian, it takes the `jujutsu`
# package from Debian's unstable suite, whose binary needs a newer glibc than
# stable ships, unpacks it with its libraries into a private prefix under the
# venv, and writes a `jj` wrapper that starts it with that prefix's dynamic
# loader.  Nothing is installed system-wide and the machine's apt state is
# left untouched: the package lists go to a temporary folder.
#
# The mirror is the one the machine's own apt sources already use; no host is
# named here.  Elsewhere, install jj yourself (see the README) and re-run make.
set -eu

VENV=${1:-.venv}
MIN_MINOR=30

say() { printf 'install-jj: %s\n' "$*" >&2; }

jj_ok() {
    # $1: a jj command; succeeds when it runs and is >= 0.$MIN_MINOR
    v=$("$1" --version 2>/dev/null | awk '{print $2}') || return 1
    [ -n "$v" ] || return 1
    major=${v%%.*}; rest=${v#*.}; minor=${rest%%.*}
    [ "$major" -gt 0 ] 2>/dev/null && return 0
    [ "$minor" -ge "$MIN_MINOR" ] 2>/dev/null
}

if [ -n "${DURABILITY_JJ:-}" ] && jj_ok "$DURABILITY_JJ"; then
    say "using DURABILITY_JJ=$DURABILITY_JJ"; exit 0
fi
if command -v jj >/dev/null 2>&1 && jj_ok "$(command -v jj)"; then
    say "using $(command -v jj) from PATH"; exit 0
fi
if [ -x "$VENV/bin/jj" ] && jj_ok "$VENV/bin/jj"; then
    say "using $VENV/bin/jj"; exit 0
fi

command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1 || {
    say "no jj >= 0.$MIN_MINOR found and this is not a Debian-like system;"
    say "install jj (see README: Installing jj) and run make again"; exit 1; }

mirror_uri() {
    # The first Debian archive URI of the machine's apt sources (deb822 or
    # one-line format), skipping the security archive.
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'BEGIN{RS=""; FS="\n"}
             /Types:[^\n]*deb/ && !/-security/ {
               for (i=1;i<=NF;i++) if ($i ~ /^URIs:/) { split($i,a," "); print a[2]; exit } }' "$f"
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        awk '$1=="deb" && $0 !~ /security/ && $0 ~ /debian/ {
               for (i=2;i<=NF;i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' "$f"
    done
}
URI=$(mirror_uri | head -n1)
[ -n "$URI" ] || { say "cannot read a Debian mirror from /etc/apt sources"; exit 1; }

ARCH=$(dpkg --print-architecture)
case "$ARCH" in
    amd64) LOADER=ld-linux-x86-64.so.2; TRIPLET=x86_64-linux-gnu ;;
    arm64) LOADER=ld-linux-aarch64.so.1; TRIPLET=aarch64-linux-gnu ;;
    *) say "unsupported architecture $ARCH; install jj yourself"; exit 1 ;;
esac

KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/lists/partial" "$WORK/cache/archives/partial" "$WORK/debs"
echo "deb [signed-by=$KEYRING] $URI unstable main" > "$WORK/sources.list"
APT="-o Dir::Etc::SourceList=$WORK/sources.list -o Dir::Etc::SourceParts=/dev/null
     -o Dir::State::Lists=$WORK/lists -o Dir::Cache=$WORK/cache -o Debug::NoLocking=1
     -o APT::Sandbox::User=root -o Acquire::Languages=none"
say "fetching the jujutsu package list from the machine's Debian mirror (unstable)"
# shellcheck disable=SC2086
apt-get -q $APT update >/dev/null
cd "$WORK/debs"
# shellcheck disable=SC2086
apt-get -q $APT download jujutsu libc6 libgcc-s1 libmimalloc3 >/dev/null
cd - >/dev/null

mkdir -p "$VENV/bin"
PREFIX=$(cd "$VENV" && pwd)/opt/jj
rm -rf "$PREFIX"; mkdir -p "$PREFIX"
for deb in "$WORK"/debs/*.deb; do dpkg -x "$deb" "$PREFIX"; done
LD=$(find "$PREFIX" -name "$LOADER" | head -n1)
[ -n "$LD" ] && [ -x "$PREFIX/usr/bin/jj" ] || { say "unpacked package lacks jj or $LOADER"; exit 1; }

cat > "$VENV/bin/jj" <<WRAP
#!/bin/sh
# Written by scripts/install-jj.sh: Debian's jujutsu with its own libraries.
exec "$LD" --argv0 jj --library-path "$PREFIX/usr/lib/$TRIPLET:$PREFIX/lib/$TRIPLET" "$PREFIX/usr/bin/jj" "\$@"
WRAP
chmod 0755 "$VENV/bin/jj"
jj_ok "$VENV/bin/jj" || { say "installed jj does not run"; exit 1; }
say "installed $("$VENV/bin/jj" --version) as $VENV/bin/jj"
