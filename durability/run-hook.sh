#!/bin/sh
# worktree-durability hook launcher (POSIX sh, no Python of its own).
#
# Run by the Claude Code plugin (hooks/hooks.json) and by the hooks that
# `durability install-hook` writes, as: /bin/sh run-hook.sh [PREFERRED-EXE]
# It finds a runnable `durability` and hands it the hook payload:
#   1. PREFERRED-EXE (the absolute path install-hook saw running),
#   2. `durability` on PATH (never the plugin's own bin/durability),
#   3. .venv/bin/durability inside the plugin root,
#   4. the usual user install places: pip --user and pipx (~/.local/bin),
#      uv tool ($UV_TOOL_BIN_DIR, $XDG_BIN_HOME), macOS pip --user.
# When none runs, it says so in one stderr line and appends a
# `toolkit-missing` gap to the spool (the NDJSON line durability/gaps/spool.py
# writes), so `durability gaps` shows the miss once the toolkit is back.
# Contract 6: whatever happens it exits 0 and prints nothing on stdout.

preferred=${1-}
# Parameter expansion, not dirname: this runs on every tool call.
case $0 in */*) here=${0%/*} ;; *) here=. ;; esac
root=${CLAUDE_PLUGIN_ROOT:-$here/..}
tried=""

# Whether $1 can run: an executable file, not the plugin's own bin/durability
# (itself a launcher), and, for a script, with its interpreter still there (a
# deleted virtualenv leaves scripts whose Python is gone).
usable() {
    [ -n "$1" ] && [ -f "$1" ] && [ -x "$1" ] || return 1
    if [ "$1" -ef "$root/bin/durability" ]; then return 1; fi
    first=""
    IFS= read -r first <"$1" 2>/dev/null
    case $first in
        '#!'*)
            interp=${first#??}
            interp=${interp# }
            interp=${interp%% *}
            if [ ! -x "$interp" ]; then
                tried="$tried $1 (its interpreter $interp is missing)"
                return 1
            fi ;;
    esac
    return 0
}

find_toolkit() {
    usable "$preferred" && { exe=$preferred; return 0; }
    old_ifs=$IFS
    IFS=:
    for dir in $PATH; do
        IFS=$old_ifs
        [ -n "$dir" ] && usable "$dir/durability" && { exe=$dir/durability; return 0; }
    done
    IFS=$old_ifs
    for exe in "$root/.venv/bin/durability" \
        "${PYTHONUSERBASE:-${HOME:-/nonexistent}/.local}/bin/durability" \
        "${PIPX_BIN_DIR:-${HOME:-/nonexistent}/.local/bin}/durability" \
        "${UV_TOOL_BIN_DIR:-/nonexistent}/durability" \
        "${XDG_BIN_HOME:-/nonexistent}/durability" \
        "${HOME:-/nonexistent}"/Library/Python/*/bin/durability; do
        usable "$exe" && return 0
    done
    return 1
}

payload=""
if find_toolkit; then
    # The payload goes straight through (no copy on the fast path).  stdout
    # goes to stderr: a broken install must not talk to the harness.
    "$exe" snapshot-hook 1>&2
    status=$?
    [ "$status" -eq 0 ] && exit 0
    # It failed (a broken install).  What it left unread is read here: all
    # of the payload when it died before reading (an import error), so the
    # gap has the payload's run id and cwd, and a pre-call hook files none.
    tried="$tried $exe (exit $status)"
    payload=$(cat)
else
    # Read once, for the run id and cwd of the gap.
    payload=$(cat)
fi

# No toolkit ran.  Record the miss the way durability/gaps/spool.py does.

# A JSON string value taken from the payload: only characters that need no
# escaping, so the line we write is always valid JSON.
# The first occurrence wins (top-level keys come before the tool's input):
# the value is cut out between two \001 marks, which JSON text cannot hold.
mark=$(printf '\001')
field() {
    printf '%s\n' "$payload" | tr '\n' ' ' \
        | sed -n "s/\"$1\"[[:space:]]*:[[:space:]]*\"\([^\"\\\\[:cntrl:]]*\)\"/$mark\1$mark/p" \
        | sed "s/^[^$mark]*$mark//; s/$mark.*//"
}
json_or_null() {
    if [ -n "$1" ]; then printf '"%s"' "$1"; else printf 'null'; fi
}

# A pre-call hook (which only announces the call) files no gap of its own:
# the same call's post-call hook meets the same miss and files it (Gemini's
# calls have no id that would make the two one gap); a refused call's hook
# neither (nothing ran).
case $(field hook_event_name) in
    PreToolUse|BeforeTool|PermissionDenied)
        printf 'durability: toolkit-missing: no runnable durability command found; the post-call hook files the gap\n' >&2
        exit 0 ;;
esac

run_id=${DURABILITY_RUN_ID:-$(field session_id)}
# The run id rules of durability/ground/ids.py: 1-200 of letters, digits and _.:@+=-,
# not starting with one of .:@+=-
case $run_id in
    ''|[.:@+=-]*|*[!A-Za-z0-9_.:@+=-]*) run_id=_invalid ;;
esac
[ "${#run_id}" -gt 200 ] && run_id=_invalid
worktree=${DURABILITY_WORKTREE:-$(field cwd)}
# Every value goes into a JSON string as it is: drop what would end or escape it.
worktree=$(printf '%s' "$worktree" | tr -d '"\\' | tr -d '\000-\037')
tool_use_id=$(field tool_use_id)
now_ms=$(( $(date +%s) * 1000 ))
# One tool call reported twice (plugin and settings) is one gap.
request_id=toolkit-missing:${tool_use_id:-$now_ms-$$}
detail="no runnable durability command found${tried:+ (tried:$tried)}; install the toolkit or run durability doctor"
detail=$(printf '%s' "$detail" | tr -d '"\\' | tr -d '\000-\037')

# The spool folder of durability/ground/paths.py: $DURABILITY_SPOOL_DIR, else spool/
# in the state folder: $DURABILITY_HOME, else platformdirs' user state folder
# ($XDG_STATE_HOME/durability or ~/.local/state/durability; macOS:
# ~/Library/Application Support/durability).
if [ -n "${DURABILITY_HOME:-}" ]; then
  state=$DURABILITY_HOME
elif [ "$(uname -s 2>/dev/null)" = Darwin ]; then
  state="$HOME/Library/Application Support/durability"
else
  state="${XDG_STATE_HOME:-$HOME/.local/state}/durability"
fi
spool=${DURABILITY_SPOOL_DIR:-$state/spool}
# durability/ground/ids.py safe_filename: a run id that is already a safe file name
# names its own spool file; any other goes to a file of the launcher's own.
case $run_id in
    [A-Za-z0-9_]*) case $run_id in *[!A-Za-z0-9_.-]*) name=_launcher ;; *) name=$run_id ;; esac ;;
    *) name=_launcher ;;
esac
[ "${#run_id}" -gt 151 ] && name=_launcher
file=$spool/$name.gaps.ndjson

umask 077
# The spool folder must be a real folder of ours (as durability/ground/paths.py
# requires): never write into a symlinked or foreign one.
if mkdir -p "$spool" 2>/dev/null && [ ! -L "$spool" ] && [ -O "$spool" ] && [ ! -L "$file" ]; then
    # A crashed writer may have left a torn line: start on a fresh one.
    lead=""
    [ -s "$file" ] && [ -n "$(tail -c 1 "$file")" ] && lead='\n'
    printf "$lead"'{"ts_ms":%s,"run_id":"%s","node_id":null,"iteration":null,"attempt":null,"worktree":%s,"source":"hook","tool_use_id":%s,"request_id":"%s","reason":"toolkit-missing","detail":"%s"}\n' \
        "$now_ms" "$run_id" "$(json_or_null "$worktree")" "$(json_or_null "$tool_use_id")" \
        "$request_id" "$detail" >>"$file" 2>/dev/null
fi
printf 'durability: toolkit-missing: no runnable durability command found; snapshot not taken (gap filed in %s)\n' "$spool" >&2
exit 0
