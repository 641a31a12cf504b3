"""``durability watch``, ``unwatch`` and ``install-hook``: thin commands over
``durability.watch_local`` and ``durability.install_hook``."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import click

from durability.cli import _run_id, _settings, attempt_options, json_option
from durability.watch import DEFAULT_MAX_DELAY_MS, DEFAULT_SETTLE_MS, WatchSpec
from engine import AttemptKey

__all__ = ["install_hook_command", "unwatch_command", "watch_command"]


def _emit(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


@click.command("watch")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--run", "run_id", required=True, callback=_run_id, help="Run id.")
@attempt_options(node_required=True, defaults=True)
@click.option("--settle-ms", type=click.IntRange(10, 600_000), default=DEFAULT_SETTLE_MS,
              show_default=True, help="Capture once the tree has been quiet this long.")
@click.option("--max-delay-ms", type=click.IntRange(10, 3_600_000),
              default=DEFAULT_MAX_DELAY_MS, show_default=True,
              help="Under continuous writes, capture at least this often.")
@click.option("--poll", is_flag=True, help="Poll instead of using inotify (network filesystems).")
@click.option("--foreground", is_flag=True,
              help="Watch in this process until interrupted, without a service.")
@json_option
def watch_command(path: Path, run_id: str, node_id: str, iteration: int, attempt: int,
                  settle_ms: int, max_delay_ms: int, poll: bool, foreground: bool,
                  as_json: bool) -> None:
    """Capture the worktree at PATH whenever it settles (Tier 2)."""
    from durability.backends import resolve_worktree

    spec = WatchSpec(resolve_worktree(path), AttemptKey(run_id, node_id, iteration, attempt),
                     settle_ms, max_delay_ms, poll)
    if foreground:
        return _foreground(spec, as_json)
    from durability.watch_local import request_watch

    answer = request_watch(_settings(), spec)
    if as_json:
        return _emit({"watch": answer["watch"], "mode": answer["mode"]})
    click.echo(f"watching {spec.worktree} for {run_id}/{node_id} ({answer['mode']})")


def _foreground(spec: WatchSpec, as_json: bool) -> None:
    from durability.watch_local import run_foreground

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started = threading.Event()
    click.echo(f"durability: watching {spec.worktree}; interrupt to stop", err=True)
    result = run_foreground(_settings(), spec, stop, started=started)
    if as_json:
        return _emit(result)
    click.echo(f"stopped watching {spec.worktree}: {_final_text(result['final'])}")


@click.command("unwatch")
@click.argument("path", type=click.Path(path_type=Path))
@json_option
def unwatch_command(path: Path, as_json: bool) -> None:
    """Stop watching PATH, with a final capture."""
    from durability.watch_local import request_unwatch

    answer = request_unwatch(_settings(), path)
    if as_json:
        return _emit({"watch": answer["watch"], "final": answer["final"]})
    click.echo(f"stopped watching {answer['watch']['worktree']}: "
               f"{_final_text(answer['final'])}")


def _final_text(final: dict[str, Any] | None) -> str:
    if final is None:
        return "no final capture"
    if "error" in final:
        return f"final capture failed ({final['error']['code']}), gap recorded"
    skipped = final.get("skipped") or []
    # Never "unchanged" when paths were left out (they are gaps).
    note = (f" ({len(skipped)} path(s) left out, see `durability gaps`)" if skipped
            else " (unchanged)" if final["deduped"] else "")
    return f"final seq {final['seq']} commit {final['commit_id'][:12]}{note}"


@click.command("install-hook")
@click.option("--scope", type=click.Choice(["user", "project", "local"]), default="user",
              show_default=True, help="Which Claude Code settings file.")
@click.option("--project-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Project folder for --scope project|local (default: here).")
@click.option("--uninstall", is_flag=True, help="Remove the hook this command added.")
@json_option
def install_hook_command(scope: str, project_dir: Path | None, uninstall: bool,
                         as_json: bool) -> None:
    """Add the snapshot hook to Claude Code's settings.json (or remove it)."""
    from durability import install_hook
    from durability.errors import InvalidInput

    if scope == "user" and project_dir is not None:
        raise InvalidInput("--project-dir is for --scope project or local")
    path = install_hook.settings_path(scope, project_dir=project_dir)
    changed = (install_hook.uninstall if uninstall else install_hook.install)(path)
    if as_json:
        return _emit({"settings": str(path), "changed": changed,
                      "installed": not uninstall})
    verb = "removed from" if uninstall else "installed in"
    state = verb if changed else ("was not in" if uninstall else "already in")
    click.echo(f"durability snapshot-hook {state} {path}")
