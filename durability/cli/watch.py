"""``durability watch``, ``unwatch`` and ``install-hook``: thin commands over
``durability.watch.foreground`` and ``durability.install.flow``."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

from durability.cli import options
from durability.store import AttemptKey
from durability.watch.watch import DEFAULT_MAX_DELAY_MS, DEFAULT_SETTLE_MS, WatchSpec

__all__ = ["COMMANDS"]


@click.command("watch")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--run", "run_id", required=True, callback=options.run_id, help="Run id.")
@options.attempt_options(node_required=True, defaults=True)
@click.option("--settle-ms", type=click.IntRange(10, 600_000), default=DEFAULT_SETTLE_MS,
              show_default=True, help="Capture once the tree has been quiet this long.")
@click.option("--max-delay-ms", type=click.IntRange(10, 3_600_000),
              default=DEFAULT_MAX_DELAY_MS, show_default=True,
              help="Under continuous writes, capture at least this often.")
@click.option("--poll", is_flag=True, help="Poll instead of using inotify (network filesystems).")
@click.option("--foreground", is_flag=True,
              help="Watch in this process until interrupted, without a service.")
@options.json_option
def watch_command(path: Path, run_id: str, node_id: str, iteration: int, attempt: int,
                  settle_ms: int, max_delay_ms: int, poll: bool, foreground: bool,
                  as_json: bool) -> None:
    """Capture the worktree at PATH whenever it settles (Tier 2).

    \b
    Example:
      durability watch . --run my-run --node main --settle-ms 500
    """
    from durability.backends import resolve_worktree

    spec = WatchSpec(resolve_worktree(path), AttemptKey(run_id, node_id, iteration, attempt),
                     settle_ms, max_delay_ms, poll)
    if foreground:
        return _foreground(spec, as_json)
    from durability.watch.foreground import request_watch

    answer = request_watch(options.settings(), spec)
    if as_json:
        return options.emit({"watch": answer["watch"], "mode": answer["mode"]})
    click.echo(f"watching {spec.worktree} for {run_id}/{node_id} ({answer['mode']})")


def _foreground(spec: WatchSpec, as_json: bool) -> None:
    from durability.watch.foreground import run_foreground

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started = threading.Event()
    click.echo(f"durability: watching {spec.worktree}; interrupt to stop", err=True)
    result = run_foreground(options.settings(), spec, stop, started=started)
    if as_json:
        return options.emit(result)
    click.echo(f"stopped watching {spec.worktree}: {_final_text(result['final'])}")


@click.command("unwatch")
@click.argument("path", type=click.Path(path_type=Path))
@options.json_option
def unwatch_command(path: Path, as_json: bool) -> None:
    """Stop watching PATH, with a final capture.

    \b
    Example:
      durability unwatch .
    """
    from durability.watch.foreground import request_unwatch

    answer = request_unwatch(options.settings(), path)
    if as_json:
        return options.emit({"watch": answer["watch"], "final": answer["final"]})
    click.echo(f"stopped watching {answer['watch']['worktree']}: "
               f"{_final_text(answer['final'])}")


def _final_text(final: dict[str, Any] | None) -> str:
    if final is None:
        return "no final capture"
    if "error" in final and final["error"]["code"] == "owner-gone":
        return f"no final capture ({final['error']['message']})"
    if "error" in final:
        return f"final capture failed ({final['error']['code']}), gap recorded"
    skipped = final.get("skipped") or []
    # Never "unchanged" when paths were left out (they are gaps).
    note = (f" ({len(skipped)} path(s) left out, see `durability gaps`)" if skipped
            else " (unchanged)" if final["deduped"] else "")
    return f"final seq {final['seq']} commit {final['commit_id'][:12]}{note}"


@click.command("install-hook")
@click.option("--harness", type=click.Choice(["claude", "codex", "gemini"]), default="claude",
              show_default=True, help="Which agent harness's hook file.")
@click.option("--scope", type=click.Choice(["user", "project", "local"]), default="user",
              show_default=True,
              help="User-wide, or the project's file (local: Claude Code only).")
@click.option("--project-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Project folder for --scope project|local (default: here).")
@click.option("--uninstall", is_flag=True, help="Remove the hook this command added.")
@click.option("--mcp", "mcp_scope", type=click.Choice(["project", "user"]), is_flag=False,
              flag_value="project",
              default=None, help="Also register `durability mcp` for Claude Code: the "
              "project's .mcp.json (--mcp, or --mcp project) or ~/.claude.json (--mcp user).")
@options.json_option
def install_hook_command(harness: str, scope: str, project_dir: Path | None, uninstall: bool,
                         mcp_scope: str | None, as_json: bool) -> None:
    """Add the snapshot hook to a harness's hook file (or remove it).

    \b
    Examples:
      durability install-hook --harness gemini --scope project
      durability install-hook --scope project --mcp     # and .mcp.json
    """
    from durability.ground.errors import InvalidInput
    from durability.install.flow import (
        check_mcp_options,
        install_or_remove,
        register_mcp,
    )

    if scope == "user" and project_dir is not None and mcp_scope != "project":
        raise InvalidInput("--project-dir is for --scope project or local")
    check_mcp_options(harness, mcp_scope)
    # The MCP entry first: a refusal there (a server of that name not ours)
    # then leaves everything as it was.
    mcp = None if mcp_scope is None else register_mcp(scope=mcp_scope, project_dir=project_dir,
                                                      remove=uninstall)
    done = install_or_remove(harness=harness, scope=scope, project_dir=project_dir,
                             remove=uninstall)
    if mcp is not None:
        done["mcp"] = mcp
    if as_json:
        return options.emit(done)
    if mcp_scope is not None:
        _say_mcp(done["mcp"])
    if uninstall:
        state = "removed from" if done["changed"] else "was not in"
        return click.echo(f"durability snapshot-hook {state} {done['settings']}")
    state = "installed in" if done["changed"] else "already in"
    click.echo(f"durability snapshot-hook {state} {done['settings']}\n"
               f"  command: {done['command']}")
    for note in done["notes"]:
        click.echo(f"durability: note: {note}", err=True)


def _say_mcp(done: dict[str, object]) -> None:
    if not done["installed"]:
        state = "removed from" if done["changed"] else "was not in"
    else:
        state = "registered in" if done["changed"] else "already in"
    click.echo(f"durability MCP server {state} {done['config']}")


COMMANDS = [watch_command, unwatch_command, install_hook_command]
