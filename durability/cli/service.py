"""The service commands: ``serve``, ``stop``, ``status``, ``service install|uninstall``,
``snapshot-hook`` and ``doctor``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from durability.cli import options
from durability.config import Settings
from durability.ground.errors import CHECK_FAILED_EXIT, ServiceError, exit_code
from durability.ground.store_errors import NotFound


@click.command()
@click.option("--socket", "socket_path", type=click.Path(path_type=Path),
              help="Socket path (default: $DURABILITY_SOCKET or the runtime folder).")
@click.option("--detach", is_flag=True,
              help="Run in the background (nothing to do when one already answers).")
@click.option("--autostarted", is_flag=True, hidden=True,
              help="Started by a hook: leave after DURABILITY_SERVICE_IDLE_MS idle.")
@click.option("--warm", "warm", multiple=True, type=click.Path(path_type=Path), hidden=True,
              help="Watch and scan this worktree as soon as the service serves.")
@options.json_option
def serve(socket_path: Path | None, detach: bool, autostarted: bool, warm: tuple[Path, ...],
          as_json: bool) -> None:
    """Run the snapshot service.

    \b
    Example:
      durability serve --detach     # start it once per login; idempotent
    """
    from durability.service import daemon

    settings = _with_socket(socket_path)
    if not detach:
        daemon.run_foreground(settings, autostarted=autostarted, warm=warm)
        return
    started = daemon.start_detached(settings)
    if as_json:
        from durability import output

        options.emit(output.StartedOut.from_record(started).dump())
    elif started.already_running:
        click.echo(f"already running (pid {started.pid}) on {started.socket}")
    else:
        click.echo(f"started (pid {started.pid}) on {started.socket}")


@click.command()
@click.option("--socket", "socket_path", type=click.Path(path_type=Path),
              help="Socket path (default: $DURABILITY_SOCKET or the runtime folder).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(0.1), default=30.0,
              show_default=True, help="Seconds to wait for it to drain and leave.")
@click.option("--kill", is_flag=True, help="SIGKILL it if it has not left by then.")
@options.json_option
def stop(socket_path: Path | None, timeout_s: float, kill: bool, as_json: bool) -> None:
    """Stop the snapshot service (it finishes the captures it holds first).

    \b
    Example:
      durability stop
    """
    from durability.service import daemon

    done = daemon.stop(_with_socket(socket_path), timeout_s=timeout_s, kill=kill)
    if as_json:
        from durability import output

        options.emit(output.StoppedOut.from_record(done).dump())
    elif not done.was_running:
        click.echo(f"not running on {done.socket}")
    else:
        how = "killed" if done.killed else "stopped"
        click.echo(f"{how} (pid {done.pid}) after {done.waited_s:.1f}s")


@click.command()
@click.option("--socket", "socket_path", type=click.Path(path_type=Path),
              help="Socket path (default: $DURABILITY_SOCKET or the runtime folder).")
@options.json_option
def status(socket_path: Path | None, as_json: bool) -> None:
    """Is the snapshot service running?  Exits 3 when none runs, 4 when one
    listens but does not answer (stopped or flooded) or runs without its
    socket (removed, or taken by something else).

    \b
    Example:
      durability status --json
    """
    from durability.service import daemon

    settings = _with_socket(socket_path)
    answer = daemon.status(settings)
    if as_json:
        options.emit({"running": answer is not None, "socket": str(settings.socket_path),
                      **(answer or {})})
    elif answer is None:
        click.echo(f"not running on {settings.socket_path} (hooks capture in-process)")
    elif answer.get("socket_missing"):
        click.echo(f"running (pid {answer['pid']}) but not on {settings.socket_path}: its "
                   "socket is gone or taken (it binds it again when it can); "
                   "`durability stop` ends it")
    elif not answer["answering"]:
        click.echo(f"not answering (pid {answer['pid']}) on {settings.socket_path}: "
                   "`durability stop --kill` ends it")
    else:
        click.echo(f"running (pid {answer.get('pid')}) on {settings.socket_path}: "
                   f"{answer.get('captures')} captures, {answer.get('requests')} requests")
    if answer is None:
        sys.exit(exit_code(NotFound("no service")))
    if not answer["answering"]:
        sys.exit(exit_code(ServiceError("not answering")))


@click.group("service")
def service_group() -> None:
    """Run the snapshot service under your service manager (systemd, launchd).

    \b
    Example:
      durability service install     # start at login, restart on failure
      durability service uninstall
    """


@service_group.command("install")
@click.option("--no-start", is_flag=True, help="Write the unit only.")
@click.option("--print", "print_only", is_flag=True, help="Print the unit; write nothing.")
@options.json_option
def service_install(no_start: bool, print_only: bool, as_json: bool) -> None:
    """Write (and enable and start) the user unit of the service."""
    from durability.service import unit

    spec = unit.unit_file(options.settings())
    if print_only:
        click.echo(spec.text, nl=False)
        return
    started = unit.install(spec, start=not no_start)
    if as_json:
        options.emit({"unit": str(spec.path), "kind": spec.kind, "started": started})
        return
    click.echo(f"wrote {spec.path}")
    if started:
        click.echo("enabled and started it")
    elif not no_start:
        click.echo("could not reach the service manager; start it with "
                   + ("`systemctl --user enable --now durability`" if spec.kind == "systemd"
                      else f"`launchctl load -w {spec.path}`"))


@service_group.command("uninstall")
@options.json_option
def service_uninstall(as_json: bool) -> None:
    """Stop the user unit of the service and remove it."""
    from durability.service import unit

    spec = unit.unit_file(options.settings())
    removed = unit.uninstall(spec)
    if as_json:
        options.emit({"unit": str(spec.path), "removed": removed})
    else:
        click.echo(f"removed {spec.path}" if removed else f"no unit at {spec.path}")


def _with_socket(socket_path: Path | None) -> Settings:
    from durability.service import daemon

    settings = options.settings()
    return daemon.with_socket(settings, socket_path) if socket_path else settings


@click.command("snapshot-hook")
def snapshot_hook() -> None:
    """The harness hook (Claude Code, Codex, Gemini): reads the payload on stdin,
    always exits 0, prints nothing.  Installed by `durability install-hook`.

    \b
    Example:
      echo '{"session_id": "s1", "cwd": "/path/to/repo"}' | durability snapshot-hook
    """
    from durability.hook import entry as hook

    sys.exit(hook.main())


@click.command()
@click.option("--project-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Check this project folder (default: here).")
@options.json_option
def doctor(project_dir: Path | None, as_json: bool) -> None:
    """Check the whole path from a tool call to a checkpoint: backend, state,
    spool, service, and every installed hook (run as the harness runs it).

    \b
    Example:
      durability doctor --project-dir ~/src/myproject
    """
    from durability.doctor.checks import run_checks

    checks = run_checks(options.settings(), os.environ, project_dir)
    if as_json:
        options.emit([{"name": c.name, "status": c.status, "ok": c.ok, "detail": c.detail,
                       "next_step": c.next_step} for c in checks])
    else:
        for c in checks:
            click.echo(f"{c.status.upper() if c.status == 'fail' else c.status:<4}  "
                       f"{c.name:<20} {c.detail}")
            if c.next_step and c.status != "ok":
                click.echo(f"{'':<26}next: {c.next_step}")
    if not all(c.ok for c in checks):
        sys.exit(CHECK_FAILED_EXIT)


COMMANDS = [serve, stop, status, service_group, snapshot_hook, doctor]
