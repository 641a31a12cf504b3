"""The ``durability`` command line: thin click commands over the library.

This module is the top of the house: it builds the group, registers every
command family (``checkpoints``, ``inspect``, ``browse``, ``service``, ``watch``,
``engine``, ``fork``, ``agent``, ``remote``, ``logs``,
``retention``), and is imported by none of them.
Every failure is one line on stderr,
``durability: <code>: <message>``, and the exit status comes from
``errors.exit_code``.
"""

from __future__ import annotations

from typing import Any

import click

from durability.cli import (
    browse,
    checkpoints,
    database,
    forget,
    fork,
    inspect,
    logs,
    remote,
    retention,
    service,
    watch,
)
from durability.cli import mcp as agent
from durability.cli import runs as engine
from durability.ground import ids
from durability.ground.errors import DurabilityError, InvalidInput, exit_code
from durability.store import EngineError

__all__ = ["cli", "main"]


class _Group(click.Group):
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


for _family in (service, checkpoints, inspect, browse, watch, engine, fork, agent, remote,
                logs, retention, database, forget):
    for _command in _family.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    cli(prog_name="durability")
