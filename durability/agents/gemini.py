"""The Gemini CLI adapter (checked against Gemini CLI 0.61.0; see
docs/explanation/session-formats.md).

One invocation is ``gemini -p "" --output-format stream-json
--approval-mode yolo --skip-trust [--model M] [--resume ID]`` with the
prompt on stdin (Gemini reads piped stdin as the prompt, and ``-p ""`` keeps
it headless; an argv prompt would be capped at 128 KiB).  ``--skip-trust``
trusts the worktree for this process only (an untrusted folder would turn
``yolo`` back into prompting).

The hook goes into a private *user* home: ``GEMINI_CLI_HOME`` names a folder
of this attempt whose ``.gemini/settings.json`` is the user's own settings
plus our ``BeforeTool`` / ``AfterTool`` entries, and whose every other entry
is a symbolic link to the user's real ``~/.gemini`` (sessions under
``tmp/``, ``history/``, logins, extensions), so sessions land where the
user's Gemini finds them and a later attempt's resume finds them too.  The
user's files are never written.  (A private *system* settings file, named
by ``GEMINI_CLI_SYSTEM_SETTINGS_PATH``, is refused by Gemini unless root
owns it and every folder above it: it is no way for a user's agent run.)

The stream: ``init`` {session_id, model}; ``message`` {role, content, delta};
``tool_use`` {tool_name, tool_id, parameters}; ``tool_result`` {tool_id,
status, output}; ``error`` (non-fatal); ``result`` {status, error?, stats}.
Usage comes only in ``result``, per invocation, per model.  The hook
payloads of 0.61.0 carry no tool call id; the stream's ``tool_id`` is the
only id of a call the runner sees.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from durability.agents._lines import capped, decode
from durability.agents.protocol import (
    AgentRequest,
    Event,
    Final,
    QuotaSignal,
    ToolCall,
    Usage,
)

__all__ = ["GeminiHarness", "classify_quota", "private_home", "settings_with_hook"]

CHECKED_VERSION = "0.61.0"
HOOK_EVENTS = ("BeforeTool", "AfterTool")
#: Gemini counts hook timeouts in milliseconds.
HOOK_TIMEOUT_MS = 15_000
HOME_ENV = "GEMINI_CLI_HOME"
GEMINI_DIR = ".gemini"
#: Folders Gemini writes sessions and project markers into: made in the
#: user's real ``~/.gemini`` before linking, so that they are shared.
SHARED_DIRS = ("tmp", "history")
#: Copied rather than linked: Gemini replaces it by a rename, which would
#: turn a link into a private file anyway.
COPIED_FILES = ("projects.json",)
#: Exit statuses Gemini documents: 42 input error (an unknown session to
#: resume is one), 53 turn limit.
EXIT_INPUT_ERROR = 42
EXIT_TURN_LIMIT = 53
_DAILY = re.compile(r"daily quota|per ?day", re.IGNORECASE)
_QUOTA = re.compile(r"exhausted your (?:daily )?quota|quota exceeded|exceeded your current quota|"
                    r"RESOURCE_EXHAUSTED|\b429\b|rate limit", re.IGNORECASE)
_LOST = re.compile(r"Error resuming session|Invalid session identifier|No previous sessions found",
                   re.IGNORECASE)
_RETRYING = re.compile(r"\bretrying\b|\bretry(?:ing)? in\b|attempt \d+", re.IGNORECASE)


def next_pacific_midnight_ms(now_s: float | None = None) -> int | None:
    """The next midnight in America/Los_Angeles (when the Gemini API's
    per-day quotas reset), or None where the zone database is missing."""
    try:
        from zoneinfo import ZoneInfo

        zone = ZoneInfo("America/Los_Angeles")
    except Exception:
        return None
    now = datetime.now(zone) if now_s is None else datetime.fromtimestamp(now_s, zone)
    midnight = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    return int(midnight.timestamp() * 1000)


def classify_quota(message: str, now_s: float | None = None) -> QuotaSignal | None:
    """A quota or rate limit in one of Gemini's error messages; None for
    anything else.  A per-day quota resets at midnight Pacific time; any
    other limit Gemini gave up retrying has no known reset."""
    if not _QUOTA.search(message):
        return None
    reset = next_pacific_midnight_ms(now_s) if _DAILY.search(message) else None
    return QuotaSignal(message=message, reset_at_ms=reset)


def settings_with_hook(command: str | None, *, base: Mapping[str, Any] | None = None,
                       max_turns: int | None = None) -> dict[str, Any]:
    """The private user settings: ``base`` (the user's own) with our hook
    entries added to each event, the turn limit when given, and Gemini's
    startup session cleanup off for this process.

    That cleanup (``general.sessionRetention``, on by default) deletes every
    chats file it cannot read a resumable conversation from *and every other
    file of the same session*; a resume in a later minute than the session's
    file name writes just such a file (a header and the old messages), so in
    0.61.0 the next start in the project deletes a resumed session whole
    (docs/explanation/session-formats.md)."""
    settings: dict[str, Any] = json.loads(json.dumps(dict(base or {})))
    general = settings.get("general")
    if not isinstance(general, dict):
        general = settings["general"] = {}
    retention = general.get("sessionRetention")
    general["sessionRetention"] = {**(retention if isinstance(retention, dict) else {}),
                                   "enabled": False}
    if max_turns is not None:
        model = settings.get("model")
        if not isinstance(model, dict):
            model = settings["model"] = {}
        model["maxSessionTurns"] = max_turns
    if command is None:
        return settings
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        hooks = settings["hooks"] = {}
    entry = {"matcher": ".*", "hooks": [{"type": "command", "name": "durability",
                                         "command": command, "timeout": HOOK_TIMEOUT_MS}]}
    for event in HOOK_EVENTS:
        groups = hooks.get(event)
        hooks[event] = [*(groups if isinstance(groups, list) else []), entry]
    return settings


def user_gemini_dir(env: Mapping[str, str]) -> Path:
    """The user's real ``.gemini`` folder, as Gemini would find it."""
    root = env.get(HOME_ENV) or env.get("HOME") or str(Path.home())
    return Path(root) / GEMINI_DIR


def _read_settings(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def private_home(home: Path, real: Path, settings: Mapping[str, Any]) -> Path:
    """Build the private ``GEMINI_CLI_HOME`` at ``home``: its
    ``.gemini/settings.json`` is ``settings``; every other entry of the
    user's real ``.gemini`` (``real``) is linked (``projects.json`` copied).
    Only ``tmp/`` and ``history/`` may be created in ``real`` (where Gemini
    would create them); nothing in it is written."""
    for name in SHARED_DIRS:
        (real / name).mkdir(parents=True, exist_ok=True)
    mine = home / GEMINI_DIR
    if mine.exists():
        shutil.rmtree(mine)
    mine.mkdir(parents=True)
    for entry in sorted(real.iterdir()):
        if entry.name == "settings.json" or entry.name.endswith(".tmp"):
            continue
        if entry.name in COPIED_FILES:
            if entry.is_file():
                shutil.copyfile(entry, mine / entry.name)
            continue
        (mine / entry.name).symlink_to(entry)
    tmp = mine / "settings.json.tmp"
    tmp.write_text(json.dumps(settings, indent=2), encoding="utf-8")
    os.replace(tmp, mine / "settings.json")
    return home


class GeminiHarness:
    """One Gemini invocation's adapter (stateful: make one per invocation)."""

    name = "gemini"
    executable = "gemini"

    def __init__(self) -> None:
        self._real: Path | None = None
        #: Assistant text since the last tool result: the final answer.
        self._answer: list[str] = []

    def argv(self, request: AgentRequest, executable: str) -> list[str]:
        argv = [executable, "-p", "", "--output-format", "stream-json",
                "--approval-mode", "yolo", "--skip-trust"]
        if request.model:
            argv += ["--model", request.model]
        if request.resume_id:
            argv += ["--resume", request.resume_id]
        return argv

    @staticmethod
    def _home(request: AgentRequest) -> Path:
        return request.private_dir / "gemini-home"

    def env(self, request: AgentRequest, base: dict[str, str]) -> dict[str, str]:
        # The user's real folder, found before we point the variable at ours.
        self._real = user_gemini_dir(base)
        return {**base, **request.hook_env, HOME_ENV: str(self._home(request))}

    def stdin(self, request: AgentRequest) -> bytes | None:
        return request.prompt.encode("utf-8")

    def prepare(self, request: AgentRequest) -> None:
        request.private_dir.mkdir(parents=True, exist_ok=True)
        real = self._real or user_gemini_dir(os.environ)
        command = shlex.join(request.hook_command) if request.hook_command else None
        settings = settings_with_hook(command, base=_read_settings(real / "settings.json"),
                                      max_turns=request.max_turns)
        private_home(self._home(request), real, settings)

    def parse(self, line: str) -> list[Event]:
        value = decode(line)
        if value is None:
            return []
        raw = capped(line, value)
        kind = value.get("type")
        if kind == "init" and isinstance(value.get("session_id"), str):
            return [Event("session", session_id=value["session_id"], raw=raw)]
        if kind == "message":
            if value.get("role") != "assistant" or not isinstance(value.get("content"), str):
                return []
            self._answer.append(value["content"])
            return [Event("message", text=value["content"], raw=raw)]
        if kind in ("tool_use", "tool_result"):
            tool_id = value.get("tool_id")
            if not isinstance(tool_id, str):
                return []
            self._answer = []
            name = str(value.get("tool_name") or tool_id.split("__", 1)[0])
            done = kind == "tool_result"
            return [Event("tool_result" if done else "tool_call",
                          tool=ToolCall(tool_id, name, completed=done), raw=raw)]
        if kind == "error":
            message = str(value.get("message") or "")
            if _RETRYING.search(message):
                return [Event("retry", text=message, raw=raw)]
            return [Event("error", text=message, raw=raw)]
        if kind == "result":
            return self._result(value, raw)
        return []

    def _result(self, value: dict[str, Any], raw: dict[str, Any]) -> list[Event]:
        events = [Event("usage", usage=u, raw=raw) for u in _usages(value.get("stats"))]
        if value.get("status") == "success":
            events.append(Event("result", text="".join(self._answer), raw=raw))
            return events
        error = value.get("error")
        message = str(error.get("message") if isinstance(error, dict) else error or "")
        quota = classify_quota(message)
        events.append(Event("quota", text=message, quota=quota, raw=raw) if quota
                      else Event("error", text=message, raw=raw))
        return events

    def finish(self, events: list[Event], returncode: int, stderr_head: str) -> Final:
        session = next((e.session_id for e in events if e.kind == "session"), None)
        result = next((e for e in reversed(events) if e.kind == "result"), None)
        quota = next((e.quota for e in reversed(events) if e.kind == "quota"), None)
        failed = [e.text for e in events if e.kind in ("quota", "error") and e.raw
                  and e.raw.get("type") == "result"]
        lost = returncode == EXIT_INPUT_ERROR and bool(_LOST.search(stderr_head))
        if quota is None and returncode != 0:
            quota = classify_quota(stderr_head[-2000:]) if _QUOTA.search(stderr_head) else None
        ok = returncode == 0 and result is not None and quota is None
        error = None
        if not ok:
            if returncode == EXIT_TURN_LIMIT:
                error = "gemini stopped at its turn limit"
            else:
                error = (failed[-1] if failed else None) or _last_line(stderr_head) \
                    or f"gemini exited with status {returncode}"
        # Gemini reports no turn count (its stats count tool calls).
        return Final(ok=ok, session_id=session, text=result.text if result else None,
                     num_turns=None, error=error, session_lost=lost, quota=quota)


def _usages(stats: Any) -> list[Usage]:
    """One Usage per model of a result's stats (``input`` is the uncached
    part of ``input_tokens``; ``cached`` the cached part)."""
    if not isinstance(stats, dict):
        return []
    models = stats.get("models")
    rows = models.items() if isinstance(models, dict) and models else [(None, stats)]
    found = []
    for model, row in rows:
        if not isinstance(row, dict):
            continue
        cached = _int(row.get("cached"))
        uncached = _int(row.get("input")) if "input" in row \
            else max(_int(row.get("input_tokens")) - cached, 0)
        usage = Usage(model=model, input_tokens=uncached,
                      output_tokens=_int(row.get("output_tokens")),
                      cache_read_tokens=cached)
        if usage.tokens:
            found.append(usage)
    return found


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()
             and not line.startswith(("Warning:", "YOLO mode", "Ripgrep"))]
    return next((line for line in lines if line.startswith("Error")), lines[-1] if lines else None)
