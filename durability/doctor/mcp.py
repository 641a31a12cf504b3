"""The MCP part of ``durability doctor``: is ``durability mcp`` registered
for Claude Code (the project's .mcp.json, the user's ~/.claude.json, the
installed plugin), and does the registered command answer?

As with hooks, "answers" is proven: the command is started as Claude Code
starts it (an argument list, never a shell, in the project folder) and must
answer an MCP ``initialize`` request as the durability server.  Only an
entry of our own form is run (``mcp_config.is_ours``, or the plugin's
launcher).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durability.doctor.report import FAIL, OK, WARN, Check
from durability.install import mcp_config

__all__ = ["mcp_checks", "run_mcp_server"]

_TIMEOUT_S = 30  # a cold start imports the SDK (about a second when warm)
_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                          "clientInfo": {"name": "durability-doctor", "version": "0"}}}


def mcp_checks(project_dir: Path, env: Mapping[str, str]) -> list[Check]:
    checks = []
    for scope in mcp_config.MCP_SCOPES:
        path = mcp_config.mcp_path(scope, project_dir=project_dir, env=env)
        found = mcp_config.find(path)
        if found is not None:
            argv = [found["command"], *map(str, found["args"])]
            checks.append(run_mcp_server(f"mcp {scope}", argv, path, project_dir, env))
    plugin = _plugin(env)
    if plugin is not None:
        root, argv = plugin
        checks.append(run_mcp_server("mcp plugin", argv, root, project_dir,
                                     {**env, "CLAUDE_PLUGIN_ROOT": str(root)}))
    if not checks:
        checks.append(Check("mcp", OK, "not registered (the agent has no durability tools)",
                            "to give it them: durability install-hook --scope project --mcp"))
    return checks


def run_mcp_server(name: str, argv: list[str], where: Path, cwd: Path,
                   env: Mapping[str, str]) -> Check:
    """Start ``argv`` and ask it to initialize; ok when it answers as ours.

    A project just cloned is not ours to trust: a command that lies inside
    the project folder (or that PATH does not find) is reported, not run."""
    again = "reinstall: durability install-hook --scope project --mcp (or --mcp user)"
    found = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=env.get("PATH"))
    if found is None:
        return Check(name, FAIL, f"{where}: {argv[0]} is not found on PATH", again)
    real, project = os.path.realpath(found), os.path.realpath(cwd)
    if real == project or real.startswith(project + os.sep):
        return Check(name, WARN, f"{where}: names {argv[0]}, inside the project; doctor does "
                     "not run a program the project itself ships", again)
    argv = [found, *argv[1:]]
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=cwd, env=dict(env))
    except OSError as exc:
        return Check(name, FAIL, f"{where}: {argv[0]} cannot run ({exc.strerror})", again)
    try:
        answer = _initialize(proc)
    finally:
        proc.kill()
        _, err = proc.communicate()
    ms = (time.monotonic() - started) * 1000
    info = (answer or {}).get("result", {}).get("serverInfo", {})
    if info.get("name") == "durability":
        return Check(name, OK, f"{where}: {argv[0]} answers initialize "
                     f"(version {info.get('version', '?')}, {ms:.0f} ms)")
    first = err.decode("utf-8", "replace").strip().splitlines()[:1]
    why = first[0][:200] if first else "no answer" if answer is None else "not our server"
    step = ("install the MCP extra: pip install 'worktree-durability[mcp]'"
            if "missing-extra" in why else again)
    return Check(name, FAIL, f"{where}: {argv[0]} does not answer as the durability MCP "
                 f"server ({why})", step)


def _initialize(proc: subprocess.Popen[bytes]) -> dict[str, Any] | None:
    """The answer to ``initialize``, or None (no answer in time, or it exited)."""
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(_INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
    except OSError:
        return None
    deadline = time.monotonic() + _TIMEOUT_S
    line = b""
    fd = proc.stdout.fileno()
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        line += chunk
    try:
        answer = json.loads(line.split(b"\n", 1)[0])
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None


def _plugin(env: Mapping[str, str]) -> tuple[Path, list[str]] | None:
    """The installed plugin's MCP server, when a copy of it declares one."""
    base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else \
        Path(env.get("HOME") or Path.home()) / ".claude"
    for manifest in sorted((base / "plugins").glob("**/.claude-plugin/plugin.json")):
        root = manifest.parent.parent
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
            server = data["mcpServers"][mcp_config.SERVER_NAME]
            command, args = server["command"], server["args"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if data.get("name") != "worktree-durability" or command != \
                "${CLAUDE_PLUGIN_ROOT}/bin/durability" or not isinstance(args, list):
            continue
        return root, [str(root / "bin" / "durability"), *map(str, args)]
    return None
