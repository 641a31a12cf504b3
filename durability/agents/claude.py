"""Claude Code driven headless (checked against the pinned 2.1.197).

One invocation is ``claude -p --output-format stream-json --verbose`` in the
task's worktree, with:

- ``--permission-mode bypassPermissions``: an unattended run has nobody to
  answer a permission prompt, and in ``-p`` mode a call that would prompt is
  refused, which leaves the task half done.  The worktree is the task's own
  (its checkpoints undo any call), so the agent may run every tool there;
  as root Claude Code accepts this mode only with ``IS_SANDBOX=1``, which
  ``env`` sets then.  A deployment that wants less passes another mode.
- ``--settings FILE``: one private settings file under the attempt's
  ``private_dir`` holding only our hooks (the events of
  ``durability.agents.hooks``), so every tool call of this process, and of
  no other, is a checkpoint.  ``--settings`` is single valued (the last one
  wins), so everything we add goes into this one file.  The user's own
  settings files are never written.
- ``--setting-sources user,project,local``: named explicitly so the choice
  does not hang on the CLI's default.  The user's and the project's own
  settings (their hooks, permission rules, environment, model, API key
  helper) still apply: the agent runs as it would for them by hand, their
  guard hooks still guard, and ours is added beside theirs.  Claude Code
  runs identical hook commands once, so an install-hook entry of ours with
  the same command does not capture twice.
- a new session: ``--session-id`` when the request names one (a UUID);
  a resumed one: ``--resume ID`` with the continuation prompt.  Claude Code
  keeps the transcript under the working folder's key: resume from the same
  worktree path.
- ``--include-partial-messages``: each message's output tokens as soon as
  the message ends (below).
- ``--model``, ``--max-turns``, ``--json-schema`` (the result then carries
  ``structured_output``).
- the prompt as the last argument, after ``--`` (a prompt starting with a
  dash is not an option); one longer than ``ARG_LIMIT`` (Linux caps one
  argument at 128 KiB) goes on stdin as one stream-json user message with
  ``--input-format stream-json``.

What the stream says (``parse``): ``system/init`` names the session (it is
repeated every turn); each ``assistant`` line is one content block of a
message, every line of a message repeating that message's usage, so usage is
folded per message id, only what was not yet counted.  The pinned CLI prints
each block with the usage of the message's *start*: input and cache tokens
are right at once, output tokens are the start's placeholder (1).  So the
adapter asks for ``--include-partial-messages``: the message's closing
``message_delta`` carries its output tokens, before its tool call runs (a
budget is checked before the call, not at the invocation's end).  The
``result``'s per-model totals (``modelUsage``, which also counts the CLI's
side requests the stream never shows) become one more usage event per model
for whatever the lines did not hold (all output tokens, with
``partial_messages=False``).  ``user`` lines carry
the tool results; ``system/api_retry`` is a retry the CLI makes itself;
``rate_limit_event`` is a limit only when its status is ``rejected``;
a synthetic assistant message (model ``<synthetic>``) carries the CLI's
own errors, among them the usage-limit ones.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Callable
from datetime import tzinfo
from pathlib import Path
from typing import Any

from durability.agents.hooks import HOOKS
from durability.agents.protocol import AgentRequest, Event, Final, QuotaSignal, ToolCall, Usage
from durability.agents.resets import reset_at_ms
from durability.ground.errors import InvalidInput
from durability.ground.fsutil import replace_file

__all__ = ["ARG_LIMIT", "PERMISSION_MODE", "SETTINGS_FILE", "SETTING_SOURCES", "ClaudeCode",
           "quota_of"]

PERMISSION_MODE = "bypassPermissions"
SETTING_SOURCES = ("user", "project", "local")
SETTINGS_FILE = "claude-settings.json"
#: A prompt longer than this (bytes) goes on stdin: Linux refuses one
#: argument above 128 KiB (MAX_ARG_STRLEN), and the rest of argv needs room.
ARG_LIMIT = 100 * 1024
#: What a line may keep in the attempt's log (``Event.raw``).
RAW_LIMIT = 16 * 1024
SYNTHETIC_MODEL = "<synthetic>"
#: Environment of an enclosing Claude Code that makes a nested one refuse to start.
NESTED_ENV = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT")
# The texts of a usage or rate limit, in a synthetic message or a result:
# the subscriber's usage-limit notices (``You've hit your session limit ·
# resets 9am (Europe/Berlin)``), an API-key 429 that outlived the CLI's
# retries (``API Error: Request rejected (429) · ...``), the subscriber's
# plain 429, out of credits, and the older ``usage limit reached|EPOCH``.
_QUOTA = re.compile(
    r"You've hit your|You've reached your|Request rejected \(429\)|"
    r"Server is temporarily limiting requests|You're out of (?:usage|extra usage)|"
    r"usage limit reached|rate[_ ]limit", re.IGNORECASE)
#: An overage status under which a rejected plan limit does not stop the agent.
_GOING_ON = ("allowed", "allowed_warning")
#: Result subtypes of a limit the task set itself: never a quota.
_OWN_LIMITS = frozenset({"error_max_turns", "error_max_budget_usd",
                         "error_max_structured_output_retries"})
_LOST = re.compile(r"No conversation found", re.IGNORECASE)


def quota_of(text: str, now_ms: int, local: tzinfo | None = None) -> QuotaSignal | None:
    """The quota a message of Claude Code's names, with its reset when given."""
    if not _QUOTA.search(text):
        return None
    return QuotaSignal(text.strip()[:500], reset_at_ms(text, now_ms, local))


class ClaudeCode:
    """The ``claude`` harness.  One instance per invocation: ``parse``
    remembers what it has folded (usage per message id, tool names)."""

    name = "claude"
    executable = "claude"

    def __init__(self, *, permission_mode: str = PERMISSION_MODE,
                 setting_sources: tuple[str, ...] = SETTING_SOURCES,
                 partial_messages: bool = True,
                 now_ms: Callable[[], int] | None = None, local_tz: tzinfo | None = None,
                 euid: Callable[[], int] = os.geteuid) -> None:
        self.permission_mode = permission_mode
        self.setting_sources = setting_sources
        self.partial_messages = partial_messages
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._local_tz = local_tz
        self._euid = euid
        #: Tokens already folded, per message id and kind.
        self._counted: dict[str, Usage] = {}
        self._tool_names: dict[str, str] = {}
        #: The message each stream (main, or a subagent's) is printing: id, model.
        self._streaming: dict[str, tuple[str | None, str | None]] = {}
        #: Tokens folded per model (name without its context tag), by kind.
        self._by_model: dict[str, tuple[int, int, int, int]] = {}
        #: The last result line whole (its ``Event.raw`` may be capped).
        self._result: dict[str, Any] | None = None

    # -- the invocation --------------------------------------------------

    def settings_file(self, request: AgentRequest) -> Path:
        return request.private_dir / SETTINGS_FILE

    def argv(self, request: AgentRequest, executable: str) -> list[str]:
        args = [executable, "-p", "--output-format", "stream-json", "--verbose",
                "--permission-mode", self.permission_mode,
                "--settings", str(self.settings_file(request)),
                "--setting-sources", ",".join(self.setting_sources)]
        if self.partial_messages:
            args.append("--include-partial-messages")
        if request.resume_id is not None:
            args += ["--resume", _session_id(request.resume_id)]
        elif request.session_id is not None:
            args += ["--session-id", _session_id(request.session_id)]
        if request.model:
            args += ["--model", request.model]
        if request.max_turns is not None:
            args += ["--max-turns", str(int(request.max_turns))]
        if request.output_schema is not None:
            args += ["--json-schema", json.dumps(request.output_schema, separators=(",", ":"))]
        if _long(request.prompt):
            return [*args, "--input-format", "stream-json"]
        return [*args, "--", request.prompt]

    def stdin(self, request: AgentRequest) -> bytes | None:
        """The long prompt as one stream-json user message; else nothing
        (empty, closed: Claude Code in ``-p`` mode would read a piped stdin
        into the prompt, so it must never inherit one)."""
        if not _long(request.prompt):
            return b""
        message = {"type": "user", "message": {
            "role": "user", "content": [{"type": "text", "text": request.prompt}]}}
        return (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")

    def env(self, request: AgentRequest, base: dict[str, str]) -> dict[str, str]:
        env = {k: v for k, v in base.items() if k not in NESTED_ENV}
        env.update(request.hook_env)
        if self.permission_mode == "bypassPermissions" and self._euid() == 0:
            env["IS_SANDBOX"] = "1"
        return env

    def prepare(self, request: AgentRequest) -> None:
        """Write the private settings file: our hooks only (none when the
        request carries no hook command)."""
        request.private_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        settings: dict[str, Any] = {}
        if request.hook_command:
            settings["hooks"] = HOOKS["claude"].hooks(shlex.join(request.hook_command))
        data = json.dumps(settings, indent=2, ensure_ascii=False) + "\n"
        replace_file(self.settings_file(request), data.encode("utf-8"), mode=0o600,
                     exact_mode=True)

    # -- the stream ------------------------------------------------------

    def parse(self, line: str) -> list[Event]:
        try:
            obj = json.loads(line)
        except ValueError:
            return []
        if not isinstance(obj, dict):
            return []
        raw = _capped(obj, len(line))
        kind = obj.get("type")
        if kind == "system":
            return self._system(obj, raw)
        if kind == "assistant":
            return self._assistant(obj, raw)
        if kind == "user":
            return self._user(obj, raw)
        if kind == "rate_limit_event":
            return self._rate_limit(obj, raw)
        if kind == "stream_event":
            return self._partial(obj, raw)
        if kind == "result":
            self._result = obj
            session = _str(obj.get("session_id"))
            return [*self._remainder(obj, session),
                    Event("result", session_id=session, text=_str(obj.get("result")), raw=raw)]
        return []

    def _system(self, obj: dict[str, Any], raw: dict[str, Any]) -> list[Event]:
        subtype = obj.get("subtype")
        if subtype == "init":
            return [Event("session", session_id=_str(obj.get("session_id")), raw=raw)]
        if subtype == "api_retry":
            text = (f"attempt {obj.get('attempt')}/{obj.get('max_retries')}: "
                    f"{obj.get('error_status')} {obj.get('error')}, retrying in "
                    f"{obj.get('retry_delay_ms')} ms")
            return [Event("retry", session_id=_str(obj.get("session_id")), text=text, raw=raw)]
        return []

    def _partial(self, obj: dict[str, Any], raw: dict[str, Any]) -> list[Event]:
        """A message's start and its closing delta (``--include-partial-messages``):
        the delta carries the message's output tokens, before its tool runs."""
        event = obj.get("event")
        if not isinstance(event, dict):
            return []
        stream = str(obj.get("parent_tool_use_id"))  # a subagent's messages interleave
        session = _str(obj.get("session_id"))
        if event.get("type") == "message_start" and isinstance(event.get("message"), dict):
            message = event["message"]
            self._streaming[stream] = (_str(message.get("id")), _str(message.get("model")))
            return self._usage(message, session, raw)
        if event.get("type") == "message_delta" and stream in self._streaming:
            message_id, model = self._streaming[stream]
            if message_id is None:
                return []
            return self._usage({"id": message_id, "model": model, "usage": event.get("usage")},
                               session, raw)
        return []

    def _rate_limit(self, obj: dict[str, Any], raw: dict[str, Any]) -> list[Event]:
        info = obj.get("rate_limit_info")
        if not isinstance(info, dict) or info.get("status") != "rejected":
            return []  # allowed, allowed_warning: a notice on a healthy stream
        if info.get("isUsingOverage") is True or info.get("overageStatus") in _GOING_ON:
            return []  # the plan's limit is hit, but usage credits carry the work on
        resets = info.get("resetsAt")
        reset_ms = int(resets * 1000) if isinstance(resets, (int, float)) else None
        text = f"rate limit rejected ({info.get('rateLimitType') or 'unknown'})"
        return [Event("quota", session_id=_str(obj.get("session_id")),
                      quota=QuotaSignal(text, reset_ms), raw=raw)]

    def _assistant(self, obj: dict[str, Any], raw: dict[str, Any]) -> list[Event]:
        message = obj.get("message")
        if not isinstance(message, dict):
            return []
        session = _str(obj.get("session_id"))
        blocks = [b for b in message.get("content") or [] if isinstance(b, dict)]
        text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
        if message.get("model") == SYNTHETIC_MODEL:
            return self._synthetic(obj, text, session, raw)
        events = self._usage(message, session, raw)
        if text:
            events.append(Event("message", session_id=session, text=text, raw=raw))
        for block in blocks:
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                name = str(block.get("name") or "")
                self._tool_names[block["id"]] = name
                events.append(Event("tool_call", session_id=session,
                                    tool=ToolCall(block["id"], name), raw=raw))
        return events

    def _synthetic(self, obj: dict[str, Any], text: str, session: str | None,
                   raw: dict[str, Any]) -> list[Event]:
        """The CLI's own message: a usage limit, or another API error."""
        limited = obj.get("error") == "rate_limit"
        quota = quota_of(text, self._now_ms(), self._local_tz)
        if quota is None and limited:
            quota = QuotaSignal(text.strip()[:500] or "rate limit", None)
        if quota is not None:
            return [Event("quota", session_id=session, quota=quota, text=text, raw=raw)]
        return [Event("error", session_id=session, text=text, raw=raw)] if text else []

    def _usage(self, message: dict[str, Any], session: str | None,
               raw: dict[str, Any]) -> list[Event]:
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return []
        model = _str(message.get("model"))
        seen = Usage(model, _int(usage.get("input_tokens")), _int(usage.get("output_tokens")),
                     _int(usage.get("cache_read_input_tokens")),
                     _int(usage.get("cache_creation_input_tokens")))
        key = _str(message.get("id")) or f"anonymous-{len(self._counted)}"
        before = self._counted.get(key, Usage(model))
        pairs = list(zip(_kinds(seen), _kinds(before), strict=True))
        total = Usage(model, *(max(a, b) for a, b in pairs))
        new = Usage(model, *(max(a, b) - b for a, b in pairs))
        self._counted[key] = total
        if new.tokens == 0:
            return []
        self._fold(new)
        return [Event("usage", session_id=session, usage=new, raw=raw)]

    def _fold(self, usage: Usage) -> None:
        name = _model_name(usage.model)
        before = self._by_model.get(name, (0, 0, 0, 0))
        self._by_model[name] = _kinds(usage, before)

    def _remainder(self, result: dict[str, Any], session: str | None) -> list[Event]:
        """What the result's per-model totals hold beyond what the stream's
        lines showed: the output tokens (each line shows the count at the
        message's start), and side requests the stream never shows."""
        per_model = result.get("modelUsage")
        if not isinstance(per_model, dict):
            return []
        events = []
        for model, given in per_model.items():
            if not isinstance(given, dict) or not isinstance(model, str):
                continue
            name = _model_name(model)
            seen = (_int(given.get("inputTokens")), _int(given.get("outputTokens")),
                    _int(given.get("cacheReadInputTokens")),
                    _int(given.get("cacheCreationInputTokens")))
            before = self._by_model.get(name, (0, 0, 0, 0))
            rest = Usage(name, *(max(0, a - b) for a, b in zip(seen, before, strict=True)))
            if rest.tokens:
                self._by_model[name] = _kinds(rest, before)
                events.append(Event("usage", session_id=session, usage=rest))
        return events

    def _user(self, obj: dict[str, Any], raw: dict[str, Any]) -> list[Event]:
        message = obj.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            return []
        session = _str(obj.get("session_id"))
        return [Event("tool_result", session_id=session,
                      tool=ToolCall(b["tool_use_id"], self._tool_names.get(b["tool_use_id"], ""),
                                    completed=True), raw=raw)
                for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
                and isinstance(b.get("tool_use_id"), str)]

    # -- the transcript --------------------------------------------------

    def transcript(self, session_id: str, worktree: Path, env: dict[str, str]) -> Path | None:
        """The session's transcript file, where Claude Code keeps it:
        ``$CLAUDE_CONFIG_DIR`` (else ``~/.claude``) ``/projects/<the working
        folder, every other character than a letter or digit a dash>/<id>.jsonl``;
        any project folder holding that id when the key is not found (Claude
        Code shortens very long keys).  None: no transcript (nothing to resume)."""
        name = _session_id(session_id) + ".jsonl"
        base = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else \
            Path(env.get("HOME") or Path.home()) / ".claude"
        projects = base / "projects"
        key = re.sub(r"[^A-Za-z0-9]", "-", str(worktree))
        for candidate in (projects / key / name, *sorted(projects.glob(f"*/{name}"))):
            if candidate.is_file() and not candidate.is_symlink():
                return candidate
        return None

    def completed_calls(self, session_id: str, worktree: Path,
                        env: dict[str, str]) -> set[str] | None:
        """The tool calls whose results the session's transcript holds: what
        the continued conversation will hold.  None when there is no
        transcript (the engine then goes by the stream's tool results).
        Only ``tool_result`` blocks of ``user`` entries are read, so a newer
        transcript format (2.1.220 added file-history lines) reads the same."""
        path = self.transcript(session_id, worktree, env)
        if path is None:
            return None
        done: set[str] = set()
        with path.open("rb") as lines:
            for line in lines:
                if b"tool_result" not in line:
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue  # a line cut by a crash mid-write
                done.update(_result_ids(entry))
        return done

    # -- the verdict -----------------------------------------------------

    def finish(self, events: list[Event], returncode: int, stderr_head: str) -> Final:
        session = next((e.session_id for e in reversed(events) if e.session_id), None)
        quotas = [e.quota for e in events if e.quota is not None]
        result = next((e.raw for e in reversed(events) if e.kind == "result" and e.raw), None)
        if result is not None and "truncated_bytes" in result and self._result is not None:
            result = self._result
        if result is None:
            return self._no_result(events, returncode, stderr_head, session, quotas)
        subtype = str(result.get("subtype") or "")
        text = _str(result.get("result"))
        common: dict[str, Any] = {
            "session_id": _str(result.get("session_id")) or session,
            "num_turns": result.get("num_turns") if isinstance(result.get("num_turns"), int)
            else None,
            "reported_cost_usd": _float(result.get("total_cost_usd")),
        }
        if subtype == "success" and not result.get("is_error"):
            return Final(True, text=text, structured=result.get("structured_output"), **common)
        errors = " ".join(str(e) for e in result.get("errors") or [] if e)
        detail = " ".join(x for x in (text, errors) if x) or subtype or "error"
        if _LOST.search(detail) or _LOST.search(stderr_head):
            return Final(False, error=f"session-lost: {detail[:500]}", session_lost=True,
                         **common)
        # A limit of the task's own (turns, budget) is its verdict, whatever
        # rate-limit notice came before it.
        quota = None if subtype in _OWN_LIMITS else self._result_quota(result, detail, quotas)
        if quota is not None:
            return Final(False, error=f"quota: {quota.message}", quota=quota, **common)
        return Final(False, error=f"{subtype or 'error'}: {detail[:500]}", **common)

    def _result_quota(self, result: dict[str, Any], detail: str,
                      quotas: list[QuotaSignal]) -> QuotaSignal | None:
        if quotas:
            return quotas[-1]
        found = quota_of(detail, self._now_ms(), self._local_tz)
        if found is None and result.get("api_error_status") == 429:
            found = QuotaSignal(detail[:500] or "HTTP 429", None)
        return found

    def _no_result(self, events: list[Event], returncode: int, stderr_head: str,
                   session: str | None, quotas: list[QuotaSignal]) -> Final:
        detail = stderr_head.strip()[:500] or f"exit status {returncode}, no result"
        if _LOST.search(stderr_head):
            return Final(False, session, error=f"session-lost: {detail}", session_lost=True)
        if quotas:
            return Final(False, session, error=f"quota: {quotas[-1].message}", quota=quotas[-1])
        return Final(False, session, error=f"no-result: {detail}")


def _result_ids(entry: Any) -> list[str]:
    if not isinstance(entry, dict) or entry.get("type") != "user":
        return []
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return []
    return [b["tool_use_id"] for b in content if isinstance(b, dict)
            and b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str)]


def _session_id(value: str) -> str:
    """A session id from outside (the store): a UUID, as Claude Code takes it."""
    try:
        return str(uuid.UUID(value))
    except (ValueError, TypeError, AttributeError):
        raise InvalidInput(f"not a Claude Code session id (a UUID): {str(value)[:80]!r}") \
            from None


def _long(prompt: str) -> bool:
    return len(prompt.encode("utf-8")) > ARG_LIMIT


def _kinds(usage: Usage, plus: tuple[int, int, int, int] = (0, 0, 0, 0)
           ) -> tuple[int, int, int, int]:
    return (usage.input_tokens + plus[0], usage.output_tokens + plus[1],
            usage.cache_read_tokens + plus[2], usage.cache_write_tokens + plus[3])


def _model_name(model: str | None) -> str:
    """``claude-opus-4-8[1m]`` (the result's key) is ``claude-opus-4-8``."""
    return re.sub(r"\[[^\]]*\]$", "", model or "")


def _capped(obj: dict[str, Any], size: int) -> dict[str, Any]:
    if size <= RAW_LIMIT:
        return obj
    keep: dict[str, Any] = {k: obj[k] for k in ("type", "subtype", "session_id", "uuid")
                            if k in obj}
    return {**keep, "truncated_bytes": size}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _float(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None
