"""``durability install-hook``: put the snapshot hook into Claude Code's
settings.json, for users who do not install the plugin.

Idempotent (installing twice leaves one entry), keeps every other setting and
hook as it was, writes valid JSON atomically (a temporary file renamed over the
old one), and ``uninstall`` removes only the entries it would have written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durability.errors import InvalidInput
from durability.fsutil import replace_file

__all__ = ["EVENTS", "HOOK_COMMAND", "SCOPES", "install", "settings_path", "uninstall"]

HOOK_COMMAND = "durability snapshot-hook"
#: Post-tool events: a failed tool (a Bash command that exited non-zero) may
#: still have written files.
EVENTS = ("PostToolUse", "PostToolUseFailure")
SCOPES = ("user", "project", "local")
# Seconds Claude Code waits for the hook: above the hook's own 10 s budget, so
# the hook always finishes (and files its gap) before the harness kills it.
HOOK_TIMEOUT_S = 15


def settings_path(scope: str, *, project_dir: Path | None = None,
                  env: Mapping[str, str] = os.environ) -> Path:
    """Claude Code's settings file for ``scope``."""
    if scope == "user":
        base = env.get("CLAUDE_CONFIG_DIR")
        return (Path(base) if base else Path(env.get("HOME") or Path.home()) / ".claude") \
            / "settings.json"
    if scope not in SCOPES:
        raise InvalidInput(f"unknown scope {scope!r}: use one of {', '.join(SCOPES)}")
    root = Path(project_dir or Path.cwd()).absolute()
    name = "settings.json" if scope == "project" else "settings.local.json"
    return root / ".claude" / name


def install(path: Path, *, command: str = HOOK_COMMAND) -> bool:
    """Add the hook to the settings file at ``path``; whether it changed."""
    settings = _read(path)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInput(f"{path}: \"hooks\" is not an object; not touching it")
    changed = False
    for event in EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidInput(f"{path}: hooks.{event} is not a list; not touching it")
        if not any(_ours(h, command) for g in groups for h in _handlers(g)):
            groups.append({"matcher": "*", "hooks": [_entry(command)]})
            changed = True
    if changed:
        _write(path, settings)
    return changed


def uninstall(path: Path, *, command: str = HOOK_COMMAND) -> bool:
    """Remove the hook entries ``install`` writes; whether anything changed."""
    if not path.exists():
        return False
    settings = _read(path)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    changed = False
    for event in EVENTS:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept = [g for g in (_without(g, command) for g in groups) if g is not None]
        if kept != groups:
            changed = True
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if changed:
        if not hooks:
            del settings["hooks"]
        _write(path, settings)
    return changed


def _entry(command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}


def _handlers(group: Any) -> list[Any]:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return handlers if isinstance(handlers, list) else []


def _ours(handler: Any, command: str) -> bool:
    return isinstance(handler, dict) and handler.get("command") == command


def _without(group: Any, command: str) -> Any:
    """``group`` less our handlers; None when only ours were in it."""
    handlers = _handlers(group)
    mine = [h for h in handlers if _ours(h, command)]
    if not mine:
        return group
    rest = [h for h in handlers if not _ours(h, command)]
    return {**group, "hooks": rest} if rest else None


def _read(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); fix it first, "
                           "nothing was changed") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} does not hold a JSON object; nothing was changed")
    return data


def _write(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` atomically, keeping its mode."""
    if path.is_symlink():
        path = path.resolve()  # a dotfiles link stays a link; its target is updated
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    replace_file(path, text.encode("utf-8"), mode=mode, exact_mode=True, sync=True)
