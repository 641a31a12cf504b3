"""The command an installed hook runs, and the launcher it runs through.

A hook is run by the harness through a shell (Claude Code and Codex: ``sh -c``;
Gemini CLI: ``bash -c``) with the harness's own PATH, which often lacks the
folder the toolkit was installed into.  So the command never names
``durability`` bare: it runs the launcher (``run-hook.sh``, copied out of the
install into the user's data folder) with the absolute path of the
``durability`` that ran ``install-hook``.  The launcher falls back to the
usual install places and, when nothing runs, files a ``toolkit-missing`` gap
and still exits 0: a deleted virtualenv costs a gap, never a failed tool call.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from durability.ground.errors import InvalidInput
from durability.ground.fsutil import replace_file

__all__ = [
    "LAUNCHER_NAME",
    "hook_command",
    "install_launcher",
    "launcher_source",
    "login_shell_finds",
    "running_executable",
]

LAUNCHER_NAME = "run-hook.sh"
# Harnesses run hooks with /bin/sh (Claude Code, Codex) or bash (Gemini); both
# exist at this path on Linux and macOS, whatever PATH the harness has.
SHELL = "/bin/sh"


def launcher_source() -> Path:
    """The launcher shipped in the package (and used by the plugin)."""
    return Path(__file__).parent.parent / LAUNCHER_NAME


def running_executable(argv0: str | None = None) -> str:
    """The absolute, resolved path of the ``durability`` command now running.

    ``argv[0]`` when it is the script (how a shell runs it), else the script
    beside this interpreter (``python -m durability`` in a virtualenv), else
    the one on PATH.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    candidates = [argv0] if os.path.basename(argv0) == "durability" else []
    candidates.append(os.path.join(os.path.dirname(sys.executable), "durability"))
    candidates.append(shutil.which("durability") or "")
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.realpath(candidate)
    raise InvalidInput("cannot tell where the durability command is installed; "
                       "run install-hook through the installed `durability` command")


def data_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where the launcher is kept: the user's data folder, outside every
    install, so that removing a virtualenv leaves a launcher that files the gap."""
    if env.get("XDG_DATA_HOME"):
        return Path(env["XDG_DATA_HOME"]) / "durability"
    import platformdirs

    return Path(platformdirs.user_data_dir("durability", appauthor=False))


def install_launcher(env: Mapping[str, str] = os.environ) -> Path:
    """Copy the launcher into the data folder (rewritten only when it differs)."""
    target = data_dir(env) / LAUNCHER_NAME
    text = launcher_source().read_bytes()
    try:
        if target.read_bytes() == text:
            return target
    except OSError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    replace_file(target, text, mode=0o755, exact_mode=True, sync=True)
    return target


def hook_command(executable: str, launcher: Path) -> str:
    """``/bin/sh '<launcher>' '<durability>'``, quoted for any POSIX shell."""
    return f"{SHELL} {shlex.quote(str(launcher))} {shlex.quote(executable)}"


def login_shell_finds(executable: str, env: Mapping[str, str] = os.environ) -> bool:
    """Whether a new login shell's PATH finds ``durability`` at ``executable``.

    The hook does not need it (its command is absolute); a user typing
    ``durability`` in a new terminal does.  The shell runs a constant script.
    """
    keep = {k: env[k] for k in ("HOME", "USER", "LOGNAME", "LANG") if k in env}
    try:
        done = subprocess.run([SHELL, "-lc", "command -v durability"], env=keep,
                              capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    found = done.stdout.strip()
    return bool(found) and os.path.realpath(found) == os.path.realpath(executable)
