#!/usr/bin/env python3
"""Write docs/reference/ from the code: the CLI, the environment variables,
the exit codes and the gap reasons.

    .venv/bin/python scripts/gen-reference.py          # rewrite the pages
    .venv/bin/python scripts/gen-reference.py --check  # exit 1 if one is stale

The facts come from the code's own tables: click's command objects
(``durability.cli.main.cli``, listed through ``list_commands``/``get_command``
so a lazy group works too), ``config.ENVIRONMENT_VARIABLES``,
``errors._EXIT_CODES`` and ``errors.GAP_REASONS``.  The prose the code does
not hold (a variable's default, what a status means, when a gap is filed) is
kept below, keyed by the same names, and must cover exactly those names: a
new variable, status or reason without its line stops this script.
tests/test_reference_docs.py regenerates in memory and compares.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 88  # help text wraps at this width, whatever the terminal

# The default of each variable, and what else a reader needs to know.
ENV_DEFAULTS: dict[str, str] = {
    "DURABILITY_HOME": "the platform's user state folder (`~/.local/state/durability`); "
                       "holds `state.db`, locks, the service log",
    "DURABILITY_DATABASE_URL": "unset: SQLite at `$DURABILITY_HOME/state.db`; a "
                               "`postgresql://...` URL needs the `postgres` extra "
                               "([runs](../how-to/runs.md#postgresql))",
    "DURABILITY_HOST_ID": "a random id kept in the state folder (`host-id`); it does not "
                          "change with the host name, and each state folder is a machine of "
                          "its own (each machine's worktrees are its own); set it to give one "
                          "machine's several state folders one id, or apart where machines "
                          "share one state folder",
    "DURABILITY_SOCKET": "`$XDG_RUNTIME_DIR/durability/service.sock`, else "
                         "`/tmp/durability-UID/service.sock` (never `$TMPDIR`: a harness may "
                         "set its own); folder 0700, socket 0600",
    "DURABILITY_SPOOL_DIR": "`$DURABILITY_HOME/spool`: one `<run>.gaps.ndjson` per run, 0700; "
                            "when a folder you named is unusable (full, another user's, a "
                            "symlink) gaps go to `$DURABILITY_HOME/spool`, then into the store",
    "DURABILITY_JJ": "`jj` on PATH, else `jj` beside the running Python, else where jj's "
                     "installers put it (`~/.cargo/bin`, `~/.local/bin`, `~/.nix-profile/bin`, "
                     "`/opt/homebrew/bin`, `/usr/local/bin`, "
                     "`/home/linuxbrew/.linuxbrew/bin`), so a hook run with a bare PATH finds "
                     "it; jj >= 0.30",
    "DURABILITY_BACKEND": "jj for a jj working copy, else git",
    "DURABILITY_JJ_TIMEOUT_MS": "120000; past it, a `jj-timeout` gap",
    "DURABILITY_HOOK_TIMEOUT_MS": "10000; past it, a `timeout` gap (the hook still exits 0)",
    "DURABILITY_BURST_QUIET_MS": "60: in a burst of requests the next capture waits for this "
                                 "much quiet (0 turns it off)",
    "DURABILITY_BURST_MAX_MS": "400: and at most this long (0 turns it off)",
    "DURABILITY_SERVICE_CONNECT_MS": "200; then the hook captures in-process",
    "DURABILITY_SERVICE_ANSWER_MS": "3000, never more than half of what is left of the hook's "
                                    "budget; then the hook captures in-process",
    "DURABILITY_MAX_NEW_FILE_SIZE": "64MiB, in bytes (`64MiB`, `512K`, `2G` also read); a "
                                    "larger new file is left out with a `file-too-large` gap",
    "DURABILITY_AUTOSTART": "1: a hook that finds no service captures in-process and starts "
                            "one in the background (0 turns that off)",
    "DURABILITY_RUN_ID": "the harness's session id",
    "DURABILITY_NODE_ID": "`session`",
    "DURABILITY_ITERATION": "0",
    "DURABILITY_ATTEMPT": "1",
    "DURABILITY_WORKTREE": "the jj workspace (else git worktree) root containing the hook's "
                           "`cwd`; for a file tool's call on a file in a repository nested "
                           "inside that root (a vendored repository, an agent's `git clone`, a "
                           "submodule), that repository "
                           "([git backend](../explanation/git-backend.md#capture))",
    "DURABILITY_REPLICATION_BOUND_MS": "300000; the checkpoint is still retried "
                                       "([remotes](../how-to/remote.md))",
    "DURABILITY_CONFIG": "`config.toml` in the platform's user config folder "
                         "(`~/.config/durability/config.toml`): the retention policy "
                         "`durability gc` applies ([retention](../how-to/retention.md))",
    "DURABILITY_GC_INTERVAL_MS": "the config file's `service_interval_hours` (24 h)",
    "DURABILITY_INFORMED_WORKTREES": "32: a hook capture of a worktree seen before stages only "
                                     "what changed (git), and a call that changed nothing "
                                     "costs no capture (both backends); least recently "
                                     "captured dropped first "
                                     "([informed captures](../explanation/git-backend.md"
                                     "#informed-hook-captures))",
    "DURABILITY_INFORMED_WATCHES": "a quarter of `fs.inotify.max_user_watches`; a larger "
                                   "worktree is captured by full scans",
    "DURABILITY_INFORMED_RESCAN_MS": "60000, so writes inotify never reports (an mmap write, a "
                                     "hard link made from outside) are taken within this long",
    "DURABILITY_INFORMED_SETTLE_MS": "20; a hook whose tree has not changed since that snapshot "
                                     "began is recorded from it, with no jj run of its own "
                                     "(docs/decisions/0047)",
    "DURABILITY_SERVICE_IDLE_MS": "1800000 (30 min) with no request, no watch and no push under "
                                  "way; the next hook starts one again; a service you started "
                                  "(`serve`, the user unit) never leaves",
}

ENV_INTRO = """\
Every `DURABILITY_*` variable the toolkit reads (`ENVIRONMENT_VARIABLES` in
`durability/config.py`; a test keeps that table equal to the names the code
reads).

A `_MS` value that is not a number of milliseconds (at least 1, or 0 where 0
turns something off; at most a day) is an `invalid-value` error naming the
variable: the CLI exits 2, the hook records one `invalid-value` gap and takes
no snapshot ([RELIABILITY](../RELIABILITY.md)).
"""

# What each exit status means.
STATUS_MEANINGS: dict[int, str] = {
    1: "an error; also any code outside the table and the capture and service families",
    2: "a bad value: an option, an argument, a setting, or a remote URL holding a password "
       "or token (use git's credential helpers)",
    3: "not found: an unknown run id, or a checkpoint it does not have; "
       "`checkpoint-collected`: `rewind` to a tool call whose checkpoint gc dropped (its "
       "files are gone; `--conversation-only` still works, "
       "[rewind](../how-to/rewind.md#after-gc-and-forget))",
    4: "the service and its protocol",
    5: "a capture that could not be taken (each is also a gap reason)",
    6: "the store: unavailable, or the copy `migrate` made does not hold the source's rows",
    7: "a restore that could not be verified or was refused (nothing in the way is changed)",
    8: "an optional extra the command needs is not installed (`browse` needs `tui`, `mcp` "
       "needs `mcp`)",
    9: "a push or fetch of checkpoints failed (`remote-failed`); `replication-failed` and "
       "`secret-withheld` are gap reasons no command exits with",
    10: "durable runs: a resume refused, the run's owner process is alive",
    11: "durable runs: a resume refused, the run's heartbeat is fresh (silent with "
        "`resume --quiet`)",
    12: "durable runs: a resume refused, the workflow, its modules, its path or the "
        "repository changed",
    13: "durable runs: a workflow file that cannot be loaded or declares a bad graph",
    14: "durable runs: a pause or cancel of a run that is over",
    15: "durable runs: a budget (turns, tokens, cost) is spent",
    16: "durable runs: an isolated task's tree did not merge into the shared worktree "
        "(a conflict, or it could not be merged back: its worktree is kept)",
    17: "`rewind`: the session's transcript is in a format not tested "
        "(`conversation-unsupported`, naming the harness and version); nothing changed, "
        "and `--code-only` still rewinds the files ([rewind](../how-to/rewind.md))",
    75: "durable runs: lost a race for a run, another claimed it first or took it over "
        "(contention, not failure; said quietly)",
}

EXIT_INTRO = """\
Every failure prints one line, `durability: <code>: <message>`, on stderr and
exits non-zero. The status comes from the code, through one table
(`_EXIT_CODES` in `durability/ground/errors.py`): the code decides, not the
class that carried it. A code outside the table falls back by family (a
capture error 5, a service error 4), then to 1. `--latest` stands for the
newest session that touched the worktree you are in; an unknown run id is
`not-found` (exit 3). The durable runs' codes: [runs](../how-to/runs.md#exit-codes).
"""

# When each gap is filed.
GAP_MEANINGS: dict[str, str] = {
    "jj-missing": "no jj binary was found (`DURABILITY_JJ`, PATH, the usual places)",
    "jj-too-old": "the jj found is older than 0.30",
    "not-a-jj-repo": "`DURABILITY_BACKEND=jj`, and no jj working copy",
    "not-a-repo": "neither a jj working copy nor a git working tree",
    "invalid-backend": "`DURABILITY_BACKEND` is neither jj nor git",
    "git-failed": "the git backend (pygit2) failed",
    "worktree-missing": "the worktree to capture does not exist",
    "jj-failed": "jj failed",
    "jj-timeout": "one jj command ran past `DURABILITY_JJ_TIMEOUT_MS`",
    "timeout": "the hook's budget ran out, the worktree lock was not free in time, or the "
               "service did not answer in time",
    "service-unreachable": "no service answered on the socket",
    "bad-hook-input": "the hook's payload is not usable (not JSON, a relative `cwd`, a bad "
                      "run id, nested too deeply)",
    "store-unavailable": "the store could not be read or written",
    "watch-degraded": "the watcher could not rely on inotify (limit reached, queue overflow) "
                      "and polled or captured the whole tree instead",
    "watch-window-missed": "a settle window was open (events seen, not yet captured) when its "
                           "watcher died; found and filed when a service or foreground watch "
                           "starts",
    "internal-error": "an unexpected error",
    "invalid-value": "a `DURABILITY_*_MS` setting is not a usable number (the hook names it)",
    "unreadable-path": "a capture left out a path it cannot read (the checkpoint holds the "
                       "rest)",
    "file-too-large": "a capture left out a new file over `DURABILITY_MAX_NEW_FILE_SIZE`",
    "replication-failed": "a checkpoint was not on a remote of its worktree within "
                          "`DURABILITY_REPLICATION_BOUND_MS` of its capture "
                          "([remotes](../how-to/remote.md))",
    "secret-withheld": "a checkpoint holding a file that matches the secret patterns (or "
                       "with one in the history its push carries) is not pushed",
    "call-unfinished": "a tool call was announced (the harness's pre-call hook) and no "
                       "post-call hook ever came for it: killed mid-call",
    "path-too-long": "a path longer than the system lets a path string be (PATH_MAX), which "
                     "jj cannot snapshot",
    "path-swapped": "jj's snapshot read below a folder that was a symlink by its end (a folder "
                    "swapped during the capture): nothing is recorded",
    "disk-full": "a write of a capture or restore failed on a file system with no space left",
}

GAP_INTRO = """\
A gap is a capture that was asked for and not taken, on record with a stable
reason (`GAP_REASONS` in `durability/ground/errors.py`), so that "nothing
changed" and "we could not look" are never confused. `durability gaps RUN`
lists them. The plugin's shell launcher files one more, `toolkit-missing`,
when no toolkit can be found to run the hook
([install-hooks](../how-to/install-hooks.md)).

A capture that left a path out (it cannot be read, jj refused a new file over
the size limit, or its name is not UTF-8, which jj cannot record) still
succeeds: the checkpoint holds everything else, `snapshot` names the paths on
stderr (and under `skipped` in `--json`), and each is a gap (`unreadable-path`,
`file-too-large`) filed once per path per attempt ([RELIABILITY](../RELIABILITY.md)).
"""

CLI_INTRO = """\
Every command of `durability`, with its options, as its `--help` prints it.
Every command's `--help` has an `Example:` block. `-h` works as `--help`.
"""

HEADER = "<!-- Generated by scripts/gen-reference.py from the code: do not edit. -->\n\n"


class Stale(Exception):
    """The prose tables above no longer cover the code's names."""


def _same_names(what: str, prose: set[object], code: set[object]) -> None:
    if prose != code:
        missing = sorted(map(str, code - prose))
        extra = sorted(map(str, prose - code))
        raise Stale(f"scripts/gen-reference.py: {what}: add {missing}, drop {extra}")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _commands(group: click.Group, ctx: click.Context,
              path: tuple[str, ...]) -> list[tuple[tuple[str, ...], click.Command,
                                                   click.Context]]:
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        sub = command.make_context(name, [], parent=ctx, resilient_parsing=True)
        found.append(((*path, name), command, sub))
        if isinstance(command, click.Group):
            found += _commands(command, sub, (*path, name))
    return found


def cli_page() -> str:
    from durability.cli.main import cli

    root = cli.make_context("durability", [], resilient_parsing=True,
                            terminal_width=WIDTH, max_content_width=WIDTH)
    assert isinstance(cli, click.Group)
    commands = _commands(cli, root, ())
    out = [HEADER, "# Command line reference\n\n", CLI_INTRO, "\n"]
    out.append("| command | what it does |\n|---|---|\n")
    for path, command, _ in commands:
        name = " ".join(path)
        anchor = "durability-" + "-".join(path)
        summary = command.get_short_help_str(limit=120)
        out.append(f"| [`durability {name}`](#{anchor}) | {_cell(summary)} |\n")
    for path, command, ctx in commands:
        out.append(f"\n## durability {' '.join(path)}\n\n```text\n")
        out.append(command.get_help(ctx).rstrip() + "\n```\n")
    return "".join(out)


def environment_page() -> str:
    from durability.config import ENVIRONMENT_VARIABLES

    _same_names("ENV_DEFAULTS", set(ENV_DEFAULTS), set(ENVIRONMENT_VARIABLES))
    out = [HEADER, "# Environment variables\n\n", ENV_INTRO,
           "\n| variable | meaning | default, and more |\n|---|---|---|\n"]
    for name, meaning in ENVIRONMENT_VARIABLES.items():
        out.append(f"| `{name}` | {_cell(meaning)} | {_cell(ENV_DEFAULTS[name])} |\n")
    return "".join(out)


def exit_codes_page() -> str:
    from durability.ground import errors

    table = errors._EXIT_CODES
    statuses = sorted(set(table.values()))
    _same_names("STATUS_MEANINGS", set(STATUS_MEANINGS), set(statuses))
    out = [HEADER, "# Exit codes\n\n", EXIT_INTRO,
           "\n| status | codes | meaning |\n|---|---|---|\n"]
    for status in statuses:
        codes = ", ".join(f"`{code}`" for code, value in table.items() if value == status)
        out.append(f"| {status} | {codes} | {_cell(STATUS_MEANINGS[status])} |\n")
    return "".join(out)


def gap_reasons_page() -> str:
    from durability.ground import errors

    _same_names("GAP_MEANINGS", set(GAP_MEANINGS), set(errors.GAP_REASONS))
    out = [HEADER, "# Gap reasons\n\n", GAP_INTRO,
           "\n| reason | filed when | exit status as an error |\n|---|---|---|\n"]
    for reason in sorted(errors.GAP_REASONS):
        status = errors._EXIT_CODES.get(reason)
        shown = str(status) if status is not None else "none (only a gap)"
        out.append(f"| `{reason}` | {_cell(GAP_MEANINGS[reason])} | {shown} |\n")
    return "".join(out)


def pages() -> dict[str, str]:
    """Each page's path under the repository and its text."""
    return {
        "docs/reference/cli.md": cli_page(),
        "docs/reference/environment.md": environment_page(),
        "docs/reference/exit-codes.md": exit_codes_page(),
        "docs/reference/gap-reasons.md": gap_reasons_page(),
    }


def stale(root: Path | None = None) -> list[str]:
    """The pages whose file under root (the repository) differs from what the
    code generates."""
    where = ROOT if root is None else root
    return [path for path, text in pages().items()
            if not (where / path).is_file() or (where / path).read_text() != text]


def main(argv: list[str]) -> int:
    try:
        if argv[1:] == ["--check"]:
            behind = stale()
            for path in behind:
                print(f"{path} is stale: run scripts/gen-reference.py", file=sys.stderr)
            return 1 if behind else 0
        for path, text in pages().items():
            (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
            (ROOT / path).write_text(text)
            print(f"wrote {path}")
    except Stale as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
