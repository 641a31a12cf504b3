"""The service commands: ``serve``, ``snapshot-hook`` and ``doctor``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from durability.cli import options
from durability.errors import CHECK_FAILED_EXIT


@click.command()
@click.option("--socket", "socket_path", type=click.Path(path_type=Path),
              help="Socket path (default: $DURABILITY_SOCKET or the runtime folder).")
@click.option("--detach", is_flag=True, help="Run in the background; print its pid.")
def serve(socket_path: Path | None, detach: bool) -> None:
    """Run the snapshot service."""
    from durability.service import daemon

    settings = options.settings()
    if socket_path is not None:
        settings = daemon.with_socket(settings, socket_path)
    if detach:
        pid = daemon.start_detached(settings)
        click.echo(json.dumps({"pid": pid, "socket": str(settings.socket_path)}))
        return
    daemon.run_foreground(settings)


@click.command("snapshot-hook")
def snapshot_hook() -> None:
    """Claude Code PostToolUse hook: reads the payload on stdin, always exits 0."""
    from durability.hook import entry as hook

    sys.exit(hook.main())


@click.command()
@options.json_option
def doctor(as_json: bool) -> None:
    """Check jj, the socket, the state and spool folders."""
    from durability.doctor import run_checks

    checks = run_checks(options.settings(), os.environ)
    if as_json:
        options.emit([c.__dict__ for c in checks])
    else:
        for c in checks:
            click.echo(f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<8} {c.detail}")
    if not all(c.ok for c in checks):
        sys.exit(CHECK_FAILED_EXIT)


COMMANDS = [serve, snapshot_hook, doctor]
