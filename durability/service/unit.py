"""The service as a unit of the user's service manager: a systemd user unit
on Linux, a launchd agent on macOS, so it starts at login and restarts on
failure without a step from the user.

The unit runs the absolute path of the ``durability`` being run (never a
bare name: a service manager's PATH is not the shell's) with the resolved
state, socket and spool locations (and ``DURABILITY_HOST_ID`` where it is
set), so the service it starts and the hooks the user installed agree on
where to meet and on the machine id they record under.  Installing writes the file
(atomically) and, when the manager is there, enables and starts it;
uninstalling stops it and removes only the file we wrote.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from durability.config import Settings
from durability.ground.errors import InvalidInput, ServiceError
from durability.ground.fsutil import replace_file

__all__ = ["LAUNCHD_LABEL", "UNIT_NAME", "UnitFile", "executable", "install", "uninstall",
           "unit_file"]

UNIT_NAME = "durability.service"
LAUNCHD_LABEL = "dev.worktree-durability.service"
# A unit that exists but was written by someone else is left alone.
_MARK = "written by `durability service install`"
# systemctl/launchctl answer at once; a wedged manager must not hang the CLI.
_MANAGER_TIMEOUT_S = 30


@dataclass(frozen=True)
class UnitFile:
    """Where the unit goes and what it holds."""

    kind: str  # "systemd" or "launchd"
    path: Path
    text: str


def executable() -> str:
    """The absolute path of the ``durability`` command being run."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    if os.path.basename(argv0) == "durability" and os.path.isfile(argv0):
        return os.path.realpath(argv0) if not os.path.islink(argv0) else os.path.abspath(argv0)
    found = shutil.which("durability")
    if found:
        return os.path.abspath(found)
    exe = Path(sys.executable).with_name("durability")
    if exe.is_file():
        return str(exe)
    raise ServiceError("cannot find the durability command to run as a service; "
                       "run this with the installed durability")


def unit_file(settings: Settings, *, platform: str = sys.platform,
              env: Mapping[str, str] = os.environ, command: str | None = None) -> UnitFile:
    """The unit for this platform and these settings (nothing written)."""
    command = command or executable()
    home = Path(env.get("HOME") or Path.home())
    if platform.startswith("linux"):
        config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
        return UnitFile("systemd", config / "systemd" / "user" / UNIT_NAME,
                        _systemd(settings, command))
    if platform == "darwin":
        return UnitFile("launchd", home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist",
                        _launchd(settings, command))
    raise InvalidInput(f"no service manager support on {platform}: run `durability serve "
                       "--detach` at login instead")


def _systemd(settings: Settings, command: str) -> str:
    lines = [f"# {_MARK}; remove with `durability service uninstall`.",
             "[Unit]",
             "Description=durability snapshot service: a checkpoint of the worktree per tool call",
             "",
             "[Service]",
             "Type=simple",
             f"ExecStart={_systemd_quote(command)} serve",
             *(f"Environment={_systemd_quote(f'{k}={v}')}" for k, v in _env(settings).items()),
             "Restart=on-failure",
             "RestartSec=2",
             "# SIGTERM drains the capture queue and removes the socket.",
             "KillSignal=SIGTERM",
             "TimeoutStopSec=60",
             "NoNewPrivileges=true",
             "",
             "[Install]",
             "WantedBy=default.target",
             ""]
    return "\n".join(lines)


def _systemd_quote(value: str) -> str:
    """A systemd word: quoted, with the characters systemd would expand escaped."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    escaped = escaped.replace("$", "$$")
    return f'"{escaped}"'


def _launchd(settings: Settings, command: str) -> str:
    env = "".join(f"\n      <key>{escape(k)}</key><string>{escape(v)}</string>"
                  for k, v in _env(settings).items())
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- {_MARK}; remove with `durability service uninstall`. -->
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
  <dict>
    <key>Label</key><string>{LAUNCHD_LABEL}</string>
    <key>ProgramArguments</key>
    <array><string>{escape(command)}</string><string>serve</string></array>
    <key>EnvironmentVariables</key>
    <dict>{env}
    </dict>
    <key>RunAtLoad</key><true/>
    <key>KeepAlive</key><dict><key>SuccessfulExit</key><false/></dict>
    <key>StandardErrorPath</key><string>{escape(str(settings.log_path))}</string>
  </dict>
</plist>
"""


def _env(settings: Settings) -> dict[str, str]:
    # The machine id too where it is set: the service must record under the
    # id the CLI and the hooks do, or neither sees the other's records.
    wanted = ("DURABILITY_HOME", "DURABILITY_SOCKET", "DURABILITY_SPOOL_DIR",
              "DURABILITY_HOST_ID")
    return {k: v for k, v in settings.to_env().items() if k in wanted}


def install(unit: UnitFile, *, start: bool = True) -> bool:
    """Write ``unit``; with ``start``, enable and start it where the manager
    runs.  Returns whether the manager was told."""
    _refuse_foreign(unit.path)
    unit.path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(unit.path, unit.text.encode(), mode=0o644, exact_mode=True)
    return start and _manager(unit, "start")


def uninstall(unit: UnitFile) -> bool:
    """Stop and disable ``unit`` where the manager runs, and remove our file.
    Returns whether a file was removed."""
    if not unit.path.exists():
        return False
    _refuse_foreign(unit.path)
    _manager(unit, "stop")
    unit.path.unlink()
    return True


def _refuse_foreign(path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    if _MARK not in text:
        raise InvalidInput(f"{path} exists and was not written by durability; "
                           "move it away first")


def _manager(unit: UnitFile, action: str) -> bool:
    """Tell systemd (``--user``) or launchd; False when it is not reachable
    (no user session bus, a container): the file is still in place."""
    if unit.kind == "systemd":
        tool = shutil.which("systemctl")
        steps = ([["daemon-reload"], ["enable", "--now", UNIT_NAME]] if action == "start"
                 else [["disable", "--now", UNIT_NAME], ["daemon-reload"]])
        argvs = [[tool, "--user", *s] for s in steps] if tool else []
    else:
        tool = shutil.which("launchctl")
        verb = "load" if action == "start" else "unload"
        argvs = [[tool, verb, "-w", str(unit.path)]] if tool else []
    if not argvs:
        return False
    for argv in argvs:
        try:
            done = subprocess.run(argv, capture_output=True, timeout=_MANAGER_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        if done.returncode != 0:
            return False
    return True
