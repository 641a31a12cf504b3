"""The ``durability`` command line: thin click commands over the library.

This module is the top of the house: it builds the group and names every
command family (``checkpoints``, ``inspect``, ``browse``, ``service``, ``watch``,
``runs``, ``fork``, ``mcp``, ``remote``, ``logs``, ``retention``, ``database``,
``forget``), and is imported by none of them.  A family is imported only when
one of its commands runs (or its own ``--help`` is asked for): ``TABLE``
names each command's module and attribute, and carries the short help
``durability --help`` lists, so neither the listing nor ``--version`` imports
any family (tests/durability/cli/test_lazy_commands.py keeps the table equal
to what the families define).
Every failure is one line on stderr,
``durability: <code>: <message>``, and the exit status comes from
``errors.exit_code``.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import Any, NamedTuple

import click

from durability.ground import ids
from durability.ground.errors import DurabilityError, InvalidInput, exit_code
from durability.ground.store_errors import EngineError

__all__ = ["TABLE", "Entry", "cli", "main"]


class Entry(NamedTuple):
    """Where a command is defined, and the short help ``--help`` lists for it
    (its help's first sentence, as click shortens it)."""

    module: str
    attr: str
    short_help: str


def _in(family: str, attr: str, short_help: str) -> Entry:
    return Entry(f"durability.cli.{family}", attr, short_help)


#: Every command: name -> where it lives and its short help.
TABLE: dict[str, Entry] = {
    "agent": _in("agents", "agent_group", "Run agent CLIs (Claude Code, Codex, Gemini) headless "
                 "as durable runs."),
    "approve": _in("runs", "approve_command",
                   "Approve NODE_ID of RUN_ID; the next resume continues there."),
    "attempts": _in("checkpoints", "attempts", "List a run's attempts with their jj_pointer."),
    "browse": _in("browse", "browse", "Browse sessions, their checkpoints and diffs; restore "
                  "one after a confirmation."),
    "cancel": _in("runs", "cancel_command", "Tell running tasks to stop and mark the run "
                  "cancelled (it can be resumed)."),
    "deny": _in("runs", "deny_command",
                "Deny NODE_ID of RUN_ID; the next resume fails the run there."),
    "diff": _in("inspect", "diff", "Show the changes between two checkpoints, or a checkpoint "
                "and the worktree."),
    "doctor": _in("service", "doctor", "Check the whole path from a tool call to a checkpoint: "
                  "backend, state, spool, service, and every installed hook (run as the "
                  "harness runs it)."),
    "forget": _in("forget", "forget", "Remove PATHS from every checkpoint of a worktree, here "
                  "and on its remotes."),
    "fork": _in("fork", "fork_command", "Fork RUN_ID at a checkpoint of a task into a new run, "
                "under the workflow file as it is now."),
    "gaps": _in("checkpoints", "gaps", "List the captures of a run that could not be taken."),
    "gc": _in("retention", "gc",
              "Drop expired checkpoints and let git or jj collect what they held."),
    "install-hook": _in("watch", "install_hook_command",
                        "Add the snapshot hook to a harness's hook file (or remove it)."),
    "log": _in("inspect", "log",
               "The timeline of the worktree at PATH (default: here), newest first."),
    "logs": _in("logs", "logs_command", "Print RUN_ID's event log, oldest first."),
    "mcp": _in("mcp", "mcp_command",
               "Serve the Model Context Protocol on stdin and stdout (for an agent)."),
    "migrate": _in("database", "migrate_command", "Copy the SQLite state store into "
                   "PostgreSQL, every table, and verify it."),
    "pause": _in("runs", "pause_command",
                 "Start no new task; let running ones finish; park the run as paused."),
    "remote": _in("remote", "remote_group",
                  "Name the git remotes this worktree's checkpoints are pushed to."),
    "restore": _in("checkpoints", "restore", "Restore a worktree to a checkpoint (a "
                   "pre-restore checkpoint is taken first)."),
    "rewind": _in("rewind", "rewind", "Go back to right after one tool call: the files as "
                  "they were then, and a new session of the agent whose conversation ends "
                  "with that call's result."),
    "resume": _in("runs", "resume_command",
                  "Resume RUN_ID where it stopped: completed tasks are not run again."),
    "run": _in("runs", "run_command",
               "Start a run of the workflow defined in WORKFLOW (a Python file)."),
    "run-status": _in("runs", "run_status_command", "A run's tasks, attempts (with jj_pointer "
                      "and latest checkpoint) and outputs."),
    "runs": _in("runs", "runs_command", "List the engine's runs, newest first (hook sessions: "
                "`durability sessions`)."),
    "serve": _in("service", "serve", "Run the snapshot service."),
    "service": _in("service", "service_group", "Run the snapshot service under your service "
                   "manager (systemd, launchd)."),
    "sessions": _in("checkpoints", "sessions", "List every run id with checkpoints or gaps "
                    "(hook sessions too), newest first."),
    "show": _in("inspect", "show", "Show one checkpoint and the files it changed."),
    "snapshot": _in("checkpoints", "snapshot",
                    "Take a checkpoint of the worktree at PATH (default: here) now."),
    "snapshot-hook": _in("service", "snapshot_hook", "The harness hook (Claude Code, Codex, "
                         "Gemini): reads the payload on stdin, always exits 0, prints nothing."),
    "snapshots": _in("checkpoints", "snapshots", "List a run's checkpoints, by attempt then seq."),
    "status": _in("service", "status", "Is the snapshot service running? Exits 3 when none "
                  "runs, 4 when one listens but does not answer (stopped or flooded) or runs "
                  "without its socket (removed, or taken by something else)."),
    "stop": _in("service", "stop",
                "Stop the snapshot service (it finishes the captures it holds first)."),
    "supervise": _in("runs", "supervise_command",
                     "Resume runs whose owner stopped beating, and quota waits that are over."),
    "unwatch": _in("watch", "unwatch_command", "Stop watching PATH, with a final capture."),
    "watch": _in("watch", "watch_command",
                 "Capture the worktree at PATH whenever it settles (Tier 2)."),
}


def load(entry: Entry) -> click.Command:
    """Import the family that defines the command of ``entry`` and return it."""
    # __import__ rather than importlib.import_module: the same import, and one
    # that ``-X importtime`` reports (the start-up test reads it).
    command = getattr(__import__(entry.module, fromlist=[entry.attr]), entry.attr)
    if not isinstance(command, click.Command):  # pragma: no cover - the table test guards it
        raise TypeError(f"{entry.module}:{entry.attr} is not a click command")
    return command


class _Commands(MutableMapping[str, click.Command]):
    """The group's commands: every name of ``TABLE`` is listed, and its
    family imported on first lookup (click's own ``Group.commands``, made lazy,
    so click and whatever reads ``cli.commands`` work unchanged)."""

    def __init__(self, table: dict[str, Entry]) -> None:
        self.table = table
        self.loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        found = self.loaded.get(name)
        if found is None:
            found = self.loaded[name] = load(self.table[name])  # KeyError: no such
        return found

    def __setitem__(self, name: str, command: click.Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self.loaded.pop(name, None)
        self.table = {k: v for k, v in self.table.items() if k != name}

    def __iter__(self) -> Iterator[str]:
        return iter(self.table.keys() | self.loaded.keys())

    def __len__(self) -> int:
        return len(self.table.keys() | self.loaded.keys())

    def __contains__(self, name: object) -> bool:
        return name in self.table or name in self.loaded


class _Group(click.Group):
    """The top group: commands resolved on demand, and every error one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        lazy = _Commands(TABLE)
        lazy.loaded.update(self.commands)  # any given up front stay, as in click.Group
        self.commands = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The listing of ``--help``, from the table: the short help of a
        command not imported yet is shortened as click shortens its help."""
        commands = self.commands
        assert isinstance(commands, _Commands)
        shown: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            entry = commands.table.get(name)
            if name in commands.loaded or entry is None:
                command = commands[name]
            else:
                command = click.Command(name, help=entry.short_help)
            if not command.hidden:
                shown.append((name, command))
        if shown:
            limit = formatter.width - 6 - max(len(name) for name, _ in shown)
            with formatter.section("Commands"):
                formatter.write_dl([(name, c.get_short_help_str(limit)) for name, c in shown])

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (DurabilityError, EngineError) as exc:
            if not getattr(exc, "quiet", False):  # a lost race for a run says nothing
                click.echo(f"durability: {exc.code}: {ids.printable(_one_line(str(exc)))}",
                           err=True)
            ctx.exit(exit_code(exc))
        except click.UsageError as exc:
            # A bad option is a user error too: one line with its code, like the rest.
            error = InvalidInput(exc.format_message())
            click.echo(f"durability: {error.code}: {error}", err=True)
            ctx.exit(exit_code(error))
        except OSError as exc:
            # A file the command needed could not be read or written (a
            # settings file, the launcher's folder): one line, not a traceback.
            where = f" {exc.filename}" if exc.filename else ""
            click.echo(f"durability: invalid-value:{where}: {exc.strerror or exc}", err=True)
            ctx.exit(exit_code(InvalidInput("")))


def _one_line(message: str) -> str:
    """A message that may span lines (a task's exception, jj's stderr) as one
    line: scripts read the first line of stderr as the whole error."""
    return " | ".join(line.strip() for line in message.splitlines() if line.strip())


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="worktree-durability")
def cli() -> None:
    """Durable agent worktrees: every tool call a restorable jj checkpoint."""


def main() -> None:
    cli(prog_name="durability")
