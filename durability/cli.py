"""The ``durability`` command line: thin click commands over the library.

Every failure is one line on stderr, ``durability: <code>: <message>``, and
the exit status from ``errors.exit_code``.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from durability import ids
from durability.config import Settings
from durability.errors import DurabilityError, InvalidInput, exit_code
from engine import AttemptKey, EngineError, Store

__all__ = ["cli", "main"]

F = TypeVar("F", bound=Callable[..., Any])


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (DurabilityError, EngineError) as exc:
            if not getattr(exc, "quiet", False):  # a lost race for a run says nothing
                click.echo(f"durability: {exc.code}: {_one_line(str(exc))}", err=True)
            ctx.exit(exit_code(exc))
        except click.UsageError as exc:
            # A bad option is a user error too: one line with its code, like the rest.
            click.echo(f"durability: invalid-value: {exc.format_message()}", err=True)
            ctx.exit(2)


def _one_line(message: str) -> str:
    """A message that may span lines (a task's exception, jj's stderr) as one
    line: scripts read the first line of stderr as the whole error."""
    return " | ".join(line.strip() for line in message.splitlines() if line.strip())


def _run_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return ids.validate_id(value, param.name.replace("_", " ") if param.name else "id")
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)


def attempt_options(*, node_required: bool, defaults: bool) -> Callable[[F], F]:
    """--node, --iteration and --attempt, shared by the commands that name an attempt."""

    def decorate(f: F) -> F:
        f = click.option("--attempt", type=click.IntRange(1), default=1 if defaults else None,
                         help="Attempt number (from 1).")(f)
        f = click.option("--iteration", type=click.IntRange(0), default=0 if defaults else None,
                         help="Iteration number (from 0).")(f)
        f = click.option("--node", "node_id", required=node_required, callback=_run_id,
                         help="Node (task) id.")(f)
        return f

    return decorate


def _settings() -> Settings:
    return Settings.from_env()


def _store(settings: Settings) -> Store:
    return Store(settings.db_path)


def _emit(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _listing(rows: list[dict[str, Any]], as_json: bool, table: Callable[[], str],
             empty: str) -> None:
    """A listing command's output: JSON rows, a table, or a note on stderr."""
    if as_json:
        _emit(rows)
    elif rows:
        click.echo(table())
    else:
        click.echo(empty, err=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="worktree-durability")
def cli() -> None:
    """Durable agent worktrees: every tool call a restorable jj checkpoint."""


@cli.command()
@click.option("--socket", "socket_path", type=click.Path(path_type=Path),
              help="Socket path (default: $DURABILITY_SOCKET or the runtime folder).")
@click.option("--detach", is_flag=True, help="Run in the background; print its pid.")
def serve(socket_path: Path | None, detach: bool) -> None:
    """Run the snapshot service."""
    from durability import daemon

    settings = _settings()
    if socket_path is not None:
        settings = daemon.with_socket(settings, socket_path)
    if detach:
        pid = daemon.start_detached(settings)
        click.echo(json.dumps({"pid": pid, "socket": str(settings.socket_path)}))
        return
    daemon.run_foreground(settings)


@cli.command("snapshot-hook")
def snapshot_hook() -> None:
    """Claude Code PostToolUse hook: reads the payload on stdin, always exits 0."""
    from durability import hook

    sys.exit(hook.main())


@cli.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--run", "run_id", required=True, callback=_run_id, help="Run id.")
@attempt_options(node_required=True, defaults=True)
@click.option("--label", help="A label for the checkpoint.")
@json_option
def snapshot(path: Path | None, run_id: str, node_id: str, iteration: int, attempt: int,
             label: str | None, as_json: bool) -> None:
    """Take a checkpoint of the worktree at PATH (default: here) now."""
    from durability.snapshot import snapshot_now

    result = snapshot_now(_settings(), key=AttemptKey(run_id, node_id, iteration, attempt),
                          path=path or Path.cwd(), label=label, request_id=str(uuid.uuid4()))
    if as_json:
        _emit(result)
    else:
        skipped = result.get("skipped", [])
        # A checkpoint that left paths out is never "unchanged": the tree may
        # match the last one only because the same paths were left out.
        note = (f" ({len(skipped)} path(s) left out, see `durability gaps`)" if skipped
                else " (unchanged: same as the latest checkpoint)" if result["deduped"] else "")
        click.echo(f"seq {result['seq']} commit {result['commit_id'][:12]}{note}")
        for item in skipped:
            click.echo(f"durability: {item['reason']}: {item['path']} is not in the checkpoint",
                       err=True)


@cli.command()
@click.argument("run_id", callback=_run_id)
@click.option("--node", "node_id", callback=_run_id, help="Only this node.")
@json_option
def snapshots(run_id: str, node_id: str | None, as_json: bool) -> None:
    """List a run's checkpoints, by attempt then seq."""
    rows = _store(_settings()).checkpoints(run_id, node_id)
    keys = ("run_id", "node_id", "iteration", "attempt", "seq", "commit_id", "source",
            "tool_use_id", "label", "worktree", "created_at_ms")
    from durability.table import checkpoints_table

    _listing([{k: getattr(r, k) for k in keys} for r in rows], as_json,
             lambda: checkpoints_table(rows), f"no checkpoints for run {run_id}")


@cli.command()
@click.argument("run_id", callback=_run_id)
@attempt_options(node_required=True, defaults=False)
@click.option("--seq", type=click.IntRange(1), help="Checkpoint seq (default: the latest).")
@click.option("--worktree", type=click.Path(path_type=Path),
              help="Restore into this worktree (default: where it was captured).")
@json_option
def restore(run_id: str, node_id: str, iteration: int | None, attempt: int | None,
            seq: int | None, worktree: Path | None, as_json: bool) -> None:
    """Restore a worktree to a checkpoint (a pre-restore checkpoint is taken first)."""
    from durability.restore import restore as do_restore

    done = do_restore(_settings(), run_id=run_id, node_id=node_id, iteration=iteration,
                      attempt=attempt, seq=seq, worktree=str(worktree) if worktree else None)
    result = {"worktree": done.worktree,
              "restored": {"seq": done.restored.seq, "commit_id": done.restored.commit_id},
              "pre_restore": {"seq": done.pre_restore_seq, "commit_id": done.pre_restore_commit}}
    if as_json:
        return _emit(result)
    click.echo(f"restored {done.worktree} to seq {done.restored.seq} "
               f"({done.restored.commit_id[:12]}); undo with --seq {done.pre_restore_seq}")


@cli.command()
@click.argument("run_id", callback=_run_id)
@json_option
def gaps(run_id: str, as_json: bool) -> None:
    """List the captures of a run that could not be taken."""
    from durability.ingest import ingest_spool

    settings = _settings()
    store = _store(settings)
    ingested = ingest_spool(store, settings.spool_dir)
    if ingested.torn:
        click.echo(f"durability: skipped {ingested.torn} torn spool line(s)", err=True)
    rows = store.gaps(run_id)
    from durability.table import gaps_table

    _listing([g.to_dict() for g in rows], as_json, lambda: gaps_table(rows),
             f"no gaps for run {run_id}")


@cli.command()
@click.argument("run_id", callback=_run_id)
@json_option
def attempts(run_id: str, as_json: bool) -> None:
    """List a run's attempts with their jj_pointer."""
    rows = _store(_settings()).attempts(run_id)
    from durability.table import attempts_table

    _listing([a.to_dict() for a in rows], as_json, lambda: attempts_table(rows),
             f"no attempts for run {run_id}")


@cli.command()
@json_option
def doctor(as_json: bool) -> None:
    """Check jj, the socket, the state and spool folders."""
    from durability.doctor import run_checks

    checks = run_checks(_settings(), os.environ)
    if as_json:
        _emit([c.__dict__ for c in checks])
    else:
        for c in checks:
            click.echo(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<8} {c.detail}")
    if not all(c.ok for c in checks):
        sys.exit(1)


def main() -> None:
    cli(prog_name="durability")



def _add_watch_commands() -> None:
    """Tier 2 and install commands live in their own module, built on the helpers above."""
    from durability import cli_watch

    cli.add_command(cli_watch.watch_command)
    cli.add_command(cli_watch.unwatch_command)
    cli.add_command(cli_watch.install_hook_command)


_add_watch_commands()


def _add_engine_commands() -> None:
    """Layer 1 run commands (run, resume, supervise...) live in their own module."""
    from durability import cli_engine

    for command in cli_engine.COMMANDS:
        cli.add_command(command)


_add_engine_commands()
