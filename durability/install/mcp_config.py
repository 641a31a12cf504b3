"""Registering ``durability mcp`` with Claude Code (``install-hook --mcp``).

Two places, as Claude Code reads them: the project's ``.mcp.json`` (scope
``project``: shared with whoever clones the project) and the user's
``~/.claude.json`` (``$CLAUDE_CONFIG_DIR/.claude.json`` when set; scope
``user``), each under ``mcpServers``.  Our entry is the server named
``durability`` whose command is a ``durability`` executable run with
``mcp``.  Registering is idempotent (an entry of ours with another command
is brought up to date), keeps every other key and server as it was, and
never replaces a ``durability`` entry that is not ours: that is refused
(``invalid-value``) with nothing written.  Nor is an entry of ours in a
project's ``.mcp.json`` that carries more than ``type``, ``command`` and
``args`` (an ``env`` with ``LD_PRELOAD`` or ``PYTHONPATH``, say) brought up to
date: that file may come with a cloned project, and registering over it would
present the project's variables to the user as this toolkit's server.  At
user scope the file is the user's own and such fields are kept.  Files are
read and written as ``install_hook`` does (valid JSON, atomically, their mode
kept).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durability.ground.errors import InvalidInput
from durability.install.harnesses import read_json, write_json

__all__ = ["MCP_SCOPES", "SERVER_NAME", "entry", "find", "is_ours", "mcp_path", "register",
           "unregister"]

SERVER_NAME = "durability"
MCP_SCOPES = ("project", "user")


def mcp_path(scope: str, *, project_dir: Path | None = None,
             env: Mapping[str, str] = os.environ) -> Path:
    """The file Claude Code reads MCP servers from at ``scope``."""
    if scope == "project":
        return Path(project_dir or Path.cwd()).absolute() / ".mcp.json"
    if scope == "user":
        base = env.get("CLAUDE_CONFIG_DIR")
        return Path(base) / ".claude.json" if base else \
            Path(env.get("HOME") or Path.home()) / ".claude.json"
    raise InvalidInput(f"the MCP server has no {scope!r} scope: use one of "
                       f"{', '.join(MCP_SCOPES)}")


def entry(executable: str) -> dict[str, Any]:
    return {"type": "stdio", "command": executable, "args": ["mcp"]}


def is_ours(server: object) -> bool:
    """An entry whose command is a ``durability`` executable run with ``mcp``."""
    if not isinstance(server, dict):
        return False
    command, args = server.get("command"), server.get("args")
    return (isinstance(command, str) and os.path.basename(command) == "durability"
            and isinstance(args, list) and args[:1] == ["mcp"])


def register(path: Path, executable: str) -> bool:
    """Add (or bring up to date) our entry in ``path``; whether it changed."""
    config = read_json(path)
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InvalidInput(f"{path}: \"mcpServers\" is not an object; not touching it")
    current = servers.get(SERVER_NAME)
    if current is not None and not is_ours(current):
        raise InvalidInput(f"{path}: an MCP server named {SERVER_NAME!r} is already there "
                           "and is not this toolkit's; nothing was changed")
    if current is not None and path.name == ".mcp.json":
        _check_project_entry(path, current)
    wanted = entry(executable)
    if current is not None and current == {**current, **wanted}:
        return False
    servers[SERVER_NAME] = {**(current or {}), **wanted}
    # ~/.claude.json holds the user's account state: private when we create it.
    write_json(path, config, new_mode=0o644 if path.name == ".mcp.json" else 0o600)
    return True


def _check_project_entry(path: Path, current: dict[str, Any]) -> None:
    extra = sorted(set(current) - {"type", "command", "args"})
    if extra:
        raise InvalidInput(f"{path}: the {SERVER_NAME!r} server there also sets "
                           f"{', '.join(map(repr, extra))}, which a project file may have "
                           "shipped; not vouching for it: remove those fields (or the entry) "
                           "and run this again; nothing was changed")


def unregister(path: Path) -> bool:
    """Remove our entry; whether anything changed."""
    if not path.exists():
        return False
    config = read_json(path)
    servers = config.get("mcpServers")
    if not isinstance(servers, dict) or not is_ours(servers.get(SERVER_NAME)):
        return False
    del servers[SERVER_NAME]
    if not servers:
        del config["mcpServers"]
    write_json(path, config)
    return True


def find(path: Path) -> dict[str, Any] | None:
    """Our entry in ``path``, if there is one (an unreadable file: none)."""
    try:
        config = read_json(path)
    except InvalidInput:
        return None
    servers = config.get("mcpServers")
    found = servers.get(SERVER_NAME) if isinstance(servers, dict) else None
    return found if is_ours(found) else None
