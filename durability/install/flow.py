"""What ``durability install-hook`` does, start to end: copy the launcher out
of the install, write (or remove) the harness's entry, and say what the user
should know (the PATH, Codex's hook trust)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durability.ground.errors import InvalidInput
from durability.install import command as hook_command
from durability.install import harnesses as install_hook
from durability.install import mcp_config

__all__ = ["check_mcp_options", "codex_trust_step", "install_or_remove", "register_mcp"]


def install_or_remove(*, harness: str, scope: str, project_dir: Path | None, remove: bool,
                      env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Install (or remove) the hook; the file, the command, and notes for the user."""
    path = install_hook.hook_path(harness, scope, project_dir=project_dir, env=env)
    result: dict[str, Any] = {"harness": harness, "scope": scope, "settings": str(path),
                              "installed": not remove}
    if remove:
        return {**result, "changed": install_hook.uninstall(path, harness=harness)}
    executable = hook_command.running_executable()
    launcher = hook_command.install_launcher(env)
    command = hook_command.hook_command(executable, launcher)
    changed = install_hook.install(path, command=command, harness=harness)
    return {**result, "changed": changed, "command": command,
            "notes": _notes(harness, scope, path, executable, env)}


def register_mcp(*, scope: str, project_dir: Path | None, remove: bool,
                 env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Register (or remove) ``durability mcp`` for Claude Code at ``scope``."""
    path = mcp_config.mcp_path(scope, project_dir=project_dir, env=env)
    result: dict[str, Any] = {"scope": scope, "config": str(path), "installed": not remove}
    if remove:
        return {**result, "changed": mcp_config.unregister(path)}
    executable = hook_command.running_executable()
    changed = mcp_config.register(path, executable)
    return {**result, "changed": changed, **mcp_config.entry(executable)}


def check_mcp_options(harness: str, mcp_scope: str | None) -> None:
    if mcp_scope is not None and harness != "claude":
        raise InvalidInput("--mcp registers the MCP server for Claude Code (--harness claude)")


def _notes(harness: str, scope: str, path: Path, executable: str,
           env: Mapping[str, str]) -> list[str]:
    notes = []
    if not hook_command.login_shell_finds(executable, env):
        notes.append(f"a login shell's PATH does not find {executable} as `durability` "
                     "(harmless: the hook names it by its full path); add "
                     f"{os.path.dirname(executable)} to PATH to type `durability` yourself")
    if harness == "codex":
        notes.append(codex_trust_step(path, scope))
    return notes


def codex_trust_step(path: Path, scope: str) -> str:
    """The one step that makes Codex run the hook.

    Codex runs an unmanaged hook only once its exact definition is trusted; the
    trust it keeps (a hash of the hook in ``[hooks.state]`` of its config.toml)
    is Codex's own format, which this toolkit does not write.
    """
    step = ("Codex runs this hook only once you trust it: start `codex`, type /hooks and "
            f"trust the three durability entries of {path} (PreToolUse, PostToolUse and "
            "Stop; one-off headless runs: `codex exec --dangerously-bypass-hook-trust`)")
    if scope == "project":
        step += ("; Codex also reads a project's .codex/ only in a trusted project "
                 "(trust the folder when Codex asks)")
    return step
