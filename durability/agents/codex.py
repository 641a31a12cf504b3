"""The OpenAI Codex CLI adapter (checked against Codex 0.171.0; see
docs/explanation/session-formats.md).

One invocation is ``codex exec --json [options] -`` with the prompt on
stdin, or ``codex exec --json [options] resume THREAD_ID -``.  The hook is
given for this process only, as ``-c hooks={...}`` (Codex reads inline
``[hooks]`` tables from a ``-c`` layer as from ``config.toml``), with
``--dangerously-bypass-hook-trust`` so that Codex runs it without a trust
recorded in the user's ``config.toml``: nothing of the user's is written,
and the user's ``CODEX_HOME`` (login, sessions) is used as it is, so a
session started by one attempt is found by the next one's resume.

The stream (``--json``): ``thread.started`` {thread_id}; ``turn.started``;
``item.started`` / ``item.updated`` / ``item.completed`` with items
``command_execution``, ``file_change``, ``mcp_tool_call``, ``web_search``
(tool calls), ``agent_message`` (text), ``reasoning``, ``error`` (a warning,
such as the hook-trust bypass notice); ``turn.completed`` {usage};
``turn.failed`` {error}; ``error`` {message}.  The stream's item ids
(``item_0``...) are per invocation and are not the model's call ids (which
the hook payloads and the rollout carry).  ``turn.completed.usage`` is the
thread's running total, so each usage event is the difference from the
previous total, starting from the total the rollout held before a resume.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from durability.agents._lines import capped, decode, next_wall_clock_ms
from durability.agents.protocol import (
    AgentRequest,
    Event,
    Final,
    QuotaSignal,
    ToolCall,
    Usage,
)

__all__ = ["CodexHarness", "classify_quota", "hooks_override", "rollout_total", "toml_inline"]

#: The version this adapter was checked against.
CHECKED_VERSION = "0.171.0"
#: Hook events: PreToolUse announces the call (a gap if it never ends),
#: PostToolUse checkpoints it, Stop checkpoints the edit a turn ends with.
HOOK_EVENTS = ("PreToolUse", "PostToolUse", "Stop")
#: Seconds Codex waits for the hook: above the hook's own 10 s budget.
HOOK_TIMEOUT_S = 15
#: The stream's tool items, and the hook's name for each.
_TOOL_ITEMS = {"command_execution": "Bash", "file_change": "apply_patch",
               "mcp_tool_call": "mcp", "web_search": "web_search"}
_USAGE_LIMIT = re.compile(r"hit your usage limit|usage_limit_reached|usage limit has been reached",
                          re.IGNORECASE)
_RATE_LIMIT = re.compile(r"exceeded retry limit, last status: 429|429 Too Many Requests",
                         re.IGNORECASE)
_TRY_AGAIN = re.compile(r"try again at (?P<when>[^.]+)", re.IGNORECASE)
_LOST = re.compile(r"no rollout found for (?:thread|conversation) id", re.IGNORECASE)
_RECONNECTING = re.compile(r"^\s*Re-?connecting\b", re.IGNORECASE)


def toml_inline(value: Any) -> str:
    """``value`` as a TOML inline value (tables, arrays, strings, numbers)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {toml_inline(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_inline(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    # A TOML basic string: JSON's escapes are TOML's, and json.dumps never
    # writes the one JSON escape TOML lacks (``\/``).
    return json.dumps(str(value), ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def hooks_override(command: str) -> str:
    """The ``-c`` value that installs ``command`` for every hook event."""
    handler = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}
    return "hooks=" + toml_inline({event: [{"hooks": [handler]}] for event in HOOK_EVENTS})


def classify_quota(message: str, now_s: float | None = None) -> QuotaSignal | None:
    """A usage or rate limit in one of Codex's messages; None for anything else.

    "You've hit your usage limit ... try again at 3:03 AM." carries the reset
    in local wall-clock time; "exceeded retry limit, last status: 429" is a
    rate limit Codex gave up retrying, with no reset known."""
    if _USAGE_LIMIT.search(message):
        when = _TRY_AGAIN.search(message)
        reset = next_wall_clock_ms(when.group("when"), now_s) if when else None
        return QuotaSignal(message=message, reset_at_ms=reset)
    if _RATE_LIMIT.search(message):
        return QuotaSignal(message=message, reset_at_ms=None)
    return None


def codex_home(env: Mapping[str, str]) -> Path:
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or Path.home()) / ".codex"


def rollout_total(home: Path, thread_id: str) -> dict[str, int]:
    """The thread's token total as its rollout last recorded it (the last
    ``token_count`` event's ``total_token_usage``); {} when not found."""
    if not re.fullmatch(r"[0-9A-Za-z-]{1,100}", thread_id):
        return {}
    total: dict[str, int] = {}
    for path in sorted((home / "sessions").glob(f"*/*/*/rollout-*-{thread_id}.jsonl")):
        try:
            with path.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    if '"token_count"' not in line:
                        continue
                    record = decode(line)
                    payload = record.get("payload") if record else None
                    info = payload.get("info") if isinstance(payload, dict) else None
                    usage = info.get("total_token_usage") if isinstance(info, dict) else None
                    if isinstance(usage, dict):
                        total = {k: v for k, v in usage.items() if isinstance(v, int)}
        except OSError:
            continue
    return total


class CodexHarness:
    """One Codex invocation's adapter (stateful: make one per invocation)."""

    name = "codex"
    executable = "codex"
    #: Codex's own sandbox for the agent's commands (``-c sandbox_mode``,
    #: which resume accepts where it refuses ``--sandbox``): writes inside
    #: the worktree only.  "danger-full-access" turns it off.
    sandbox = "workspace-write"

    def __init__(self) -> None:
        self._home: Path | None = None
        self._total: dict[str, int] = {}
        self._seen_tools: set[str] = set()
        self._structured = False
        self._last_message: str | None = None

    # -- starting ---------------------------------------------------------
    def argv(self, request: AgentRequest, executable: str) -> list[str]:
        argv = [executable, "exec", "--json", "--skip-git-repo-check",
                "--cd", str(request.worktree),
                "-c", f"sandbox_mode={toml_inline(self.sandbox)}",
                "-c", 'approval_policy="never"']
        if request.hook_command:
            argv += ["-c", hooks_override(shlex.join(request.hook_command)),
                     "--dangerously-bypass-hook-trust"]
        if request.model:
            argv += ["--model", request.model]
        if request.resume_id:
            # resume refuses --output-schema; the schema came with the session.
            return [*argv, "resume", request.resume_id, "-"]
        if request.output_schema is not None:
            argv += ["--output-schema", str(self._schema_path(request))]
            self._structured = True
        return [*argv, "-"]

    def env(self, request: AgentRequest, base: dict[str, str]) -> dict[str, str]:
        env = {**base, **request.hook_env}
        self._home = codex_home(env)
        return env

    def stdin(self, request: AgentRequest) -> bytes | None:
        return request.prompt.encode("utf-8")

    def prepare(self, request: AgentRequest) -> None:
        request.private_dir.mkdir(parents=True, exist_ok=True)
        if request.output_schema is not None and not request.resume_id:
            path = self._schema_path(request)
            path.write_text(json.dumps(request.output_schema), encoding="utf-8")
            self._structured = True
        if request.resume_id:
            home = self._home or codex_home(os.environ)
            self._total = rollout_total(home, request.resume_id)

    @staticmethod
    def _schema_path(request: AgentRequest) -> Path:
        return request.private_dir / "codex-output-schema.json"

    # -- the stream -------------------------------------------------------
    def parse(self, line: str) -> list[Event]:
        value = decode(line)
        if value is None:
            return []
        raw = capped(line, value)
        kind = value.get("type")
        if kind == "thread.started" and isinstance(value.get("thread_id"), str):
            return [Event("session", session_id=value["thread_id"], raw=raw)]
        if kind in ("item.started", "item.updated", "item.completed"):
            return self._item(kind, value.get("item"), raw)
        if kind == "turn.completed":
            usage = self._usage(value.get("usage"))
            events = [Event("usage", usage=usage, raw=raw)] if usage else []
            # The turn's answer: its last agent message (what ``-o`` writes).
            return [*events, Event("result", text=self._last_message, raw=raw)]
        if kind == "turn.failed":
            error = value.get("error")
            message = str(error.get("message") if isinstance(error, dict) else error or "")
            return [self._failure(message, raw)]
        if kind == "error":
            message = str(value.get("message") or "")
            if _RECONNECTING.search(message):
                return [Event("retry", text=message, raw=raw)]
            return [self._failure(message, raw)]
        return []

    def _failure(self, message: str, raw: dict[str, Any]) -> Event:
        quota = classify_quota(message)
        if quota is not None:
            return Event("quota", text=message, quota=quota, raw=raw)
        return Event("error", text=message, raw=raw)

    def _item(self, kind: str, item: Any, raw: dict[str, Any]) -> list[Event]:
        if not isinstance(item, dict):
            return []
        item_type, item_id = item.get("type"), str(item.get("id") or "")
        if item_type in _TOOL_ITEMS and item_id:
            name = _TOOL_ITEMS[str(item_type)]
            if item_type == "mcp_tool_call":
                name = f"mcp__{item.get('server')}__{item.get('tool')}"
            events = []
            if item_id not in self._seen_tools:
                self._seen_tools.add(item_id)
                events.append(Event("tool_call", tool=ToolCall(item_id, name), raw=raw))
            if kind == "item.completed":
                events.append(Event("tool_result", tool=ToolCall(item_id, name, completed=True),
                                    raw=raw))
            return events
        if kind != "item.completed":
            return []
        if item_type == "agent_message" and isinstance(item.get("text"), str):
            self._last_message = item["text"]
            return [Event("message", text=item["text"], raw=raw)]
        if item_type == "error":
            # Warnings Codex goes on after (the hook-trust bypass notice, an
            # unknown model's metadata): logged, not a verdict.
            return [Event("error", text=str(item.get("message") or ""), raw=raw)]
        return []

    def _usage(self, usage: Any) -> Usage | None:
        if not isinstance(usage, dict):
            return None
        total = {k: v for k, v in usage.items() if isinstance(v, int)}
        delta = {k: max(v - self._total.get(k, 0), 0) for k, v in total.items()}
        self._total = total
        cached = delta.get("cached_input_tokens", 0)
        return Usage(input_tokens=max(delta.get("input_tokens", 0) - cached, 0),
                     output_tokens=delta.get("output_tokens", 0),
                     cache_read_tokens=cached,
                     cache_write_tokens=delta.get("cache_write_input_tokens", 0))

    # -- the verdict ------------------------------------------------------
    def finish(self, events: list[Event], returncode: int, stderr_head: str) -> Final:
        session = next((e.session_id for e in events if e.kind == "session"), None)
        texts = [e.text for e in events if e.kind in ("message", "result") and e.text is not None]
        quota = next((e.quota for e in reversed(events) if e.kind == "quota"), None)
        # Only a failed turn fails the invocation; a top-level error Codex
        # went on after is logged, and names the failure when there is one.
        failed = [e.text for e in events if e.raw and e.raw.get("type") == "turn.failed"]
        errors = [e.text for e in events if e.kind in ("quota", "error") and e.raw
                  and e.raw.get("type") == "error"]
        turns = sum(1 for e in events if e.kind == "result")
        lost = bool(_LOST.search(stderr_head))
        text = texts[-1] if texts else None
        structured: Any = None
        if self._structured and text is not None:
            try:
                structured = json.loads(text)
            except ValueError:
                structured = None
        ok = returncode == 0 and not failed and quota is None and not lost
        error = None
        if not ok:
            error = (failed[-1] if failed else None) or (errors[-1] if errors else None) \
                or _first_error_line(stderr_head) or f"codex exited with status {returncode}"
        return Final(ok=ok, session_id=session, text=text, structured=structured,
                     num_turns=turns or None, error=error, session_lost=lost, quota=quota)


def _first_error_line(stderr_head: str) -> str | None:
    for line in stderr_head.splitlines():
        if line.startswith("Error"):
            return line.strip()
    return None
