"""``durability install-hook``: put the snapshot hook into an agent harness's
hook file, for users who do not install the plugin.

One table (``HARNESSES``) says, per harness, which file at which scope, which
events, and the exact shape of one hook entry: Claude Code's settings.json
(``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure`` and
``PermissionDenied``, timeout in seconds), OpenAI Codex CLI's hooks.json
(``PreToolUse``, ``PostToolUse`` and ``Stop``, seconds) and Gemini CLI's
settings.json (``BeforeTool`` and ``AfterTool``, milliseconds).  The
pre-call event captures nothing: it announces the call, so that one killed
before its post-call hook is a ``call-unfinished`` gap
(``durability.gaps.calls``).

Idempotent (installing twice leaves one entry; an entry of ours with an older
command is updated in place), keeps every other setting and hook as it was,
writes valid JSON atomically (a temporary file renamed over the old one), and
``uninstall`` removes only entries of ours (``is_ours``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from durability.agents.hooks import (
    CLAUDE_EVENTS,
    DENIED_EVENTS,
    HOOK_TIMEOUT_S,
    HOOKS,
    PRE_CALL_EVENTS,
    HookSpec,
)
from durability.ground.errors import InvalidInput
from durability.ground.fsutil import replace_file

__all__ = [
    "DENIED_EVENTS",
    "EVENTS",
    "HARNESSES",
    "HOOK_TIMEOUT_S",
    "PRE_CALL_EVENTS",
    "SCOPES",
    "Harness",
    "hook_path",
    "install",
    "installed_commands",
    "is_ours",
    "read_json",
    "settings_path",
    "uninstall",
    "write_json",
]

SCOPES = ("user", "project", "local")
# Ours: the legacy bare command, a `durability` executable's snapshot-hook
# (quoted or not), or the launcher (install-hook's and the plugin's).
_OURS = re.compile(r"(^|/)durability'? snapshot-hook\s*$|(^|/)durability/run-hook\.sh['\"]?(\s|$)")
#: Claude Code's events (the table is ``durability.agents.hooks``: an agent
#: run's private settings use the same events and entry).
EVENTS = CLAUDE_EVENTS


@dataclass(frozen=True)
class Harness:
    name: str
    events: tuple[str, ...]
    scopes: tuple[str, ...]
    #: The matcher of the group we add (None: the key is left out).
    matcher: str | None
    #: The timeout as the harness counts it.
    timeout: int
    #: Extra fields of the handler (Gemini CLI names each hook).
    extra: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, name: str, scopes: tuple[str, ...]) -> Harness:
        spec = HOOKS[name]
        return cls(name, spec.events, scopes, spec.matcher, spec.timeout, spec.extra)

    def entry(self, command: str) -> dict[str, Any]:
        return HookSpec(self.events, self.matcher, self.timeout, self.extra).entry(command)

    def group(self, command: str) -> dict[str, Any]:
        return HookSpec(self.events, self.matcher, self.timeout, self.extra).group(command)


HARNESSES = {
    "claude": Harness.of("claude", SCOPES),
    "codex": Harness.of("codex", ("user", "project")),
    "gemini": Harness.of("gemini", ("user", "project")),
}


def hook_path(harness: str, scope: str, *, project_dir: Path | None = None,
              env: Mapping[str, str] = os.environ) -> Path:
    """The hook file of ``harness`` at ``scope``."""
    spec = _harness(harness)
    if scope not in spec.scopes:
        raise InvalidInput(f"{harness} has no {scope!r} scope: use one of "
                           f"{', '.join(spec.scopes)}")
    if harness == "claude":
        return settings_path(scope, project_dir=project_dir, env=env)
    home = Path(env.get("HOME") or Path.home())
    root = Path(project_dir or Path.cwd()).absolute()
    if harness == "codex":
        base = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
        return (base if scope == "user" else root / ".codex") / "hooks.json"
    return (home if scope == "user" else root) / ".gemini" / "settings.json"


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


def is_ours(command: object) -> bool:
    return isinstance(command, str) and bool(_OURS.search(command.strip()))


def install(path: Path, *, command: str, harness: str = "claude") -> bool:
    """Add the hook running ``command`` to the file at ``path``, or bring an
    entry of ours up to date; whether the file changed."""
    spec = _harness(harness)
    settings = _read(path)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInput(f"{path}: \"hooks\" is not an object; not touching it")
    changed = False
    for event in spec.events:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InvalidInput(f"{path}: hooks.{event} is not a list; not touching it")
        mine = [h for g in groups for h in _handlers(g) if _ours(h)]
        if not mine:
            groups.append(spec.group(command))
            changed = True
        for handler in mine:
            if handler != {**handler, **spec.entry(command)}:
                handler.update(spec.entry(command))
                changed = True
    if changed:
        _write(path, settings)
    return changed


def installed_commands(path: Path, harness: str = "claude") -> dict[str, list[str]]:
    """The commands of our entries in the file at ``path``, by event."""
    try:
        settings = _read(path)
    except InvalidInput:
        return {}
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return {}
    found: dict[str, list[str]] = {}
    for event in _harness(harness).events:
        groups = hooks.get(event)
        for g in groups if isinstance(groups, list) else []:
            found.setdefault(event, []).extend(h["command"] for h in _handlers(g) if _ours(h))
    return {event: commands for event, commands in found.items() if commands}


def uninstall(path: Path, *, harness: str = "claude") -> bool:
    """Remove the hook entries of ours; whether anything changed."""
    if not path.exists():
        return False
    settings = _read(path)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    changed = False
    for event in _harness(harness).events:
        groups = hooks.get(event)
        if not isinstance(groups, list):
            continue
        kept = [g for g in (_without(g) for g in groups) if g is not None]
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


def _harness(name: str) -> Harness:
    try:
        return HARNESSES[name]
    except KeyError:
        raise InvalidInput(f"unknown harness {name!r}: use one of "
                           f"{', '.join(HARNESSES)}") from None


def _handlers(group: Any) -> list[Any]:
    handlers = group.get("hooks") if isinstance(group, dict) else None
    return handlers if isinstance(handlers, list) else []


def _ours(handler: Any) -> bool:
    return isinstance(handler, dict) and is_ours(handler.get("command"))


def _without(group: Any) -> Any:
    """``group`` less our handlers; None when only ours were in it."""
    handlers = _handlers(group)
    mine = [h for h in handlers if _ours(h)]
    if not mine:
        return group
    rest = [h for h in handlers if not _ours(h)]
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


def _write(path: Path, data: dict[str, Any], *, new_mode: int = 0o644) -> None:
    """Write ``data`` as JSON to ``path`` atomically, keeping its mode
    (``new_mode`` for a file that is not there yet)."""
    if path.is_symlink():
        path = path.resolve()  # a dotfiles link stays a link; its target is updated
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = new_mode
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    replace_file(path, text.encode("utf-8"), mode=mode, exact_mode=True, sync=True)


#: The same careful reading and writing, for the MCP server's entry (mcp_config).
read_json = _read
write_json = _write
