"""The Claude Agent SDK for Python: a ready ``PostToolUse`` /
``PostToolUseFailure`` hook callback, and the ``HookMatcher`` entries for
``ClaudeAgentOptions(hooks=...)``.  Needs the ``sdk`` extra
(``claude-agent-sdk``)::

    from claude_agent_sdk import ClaudeAgentOptions
    from durability.integrations.sdk import hook_matchers

    options = ClaudeAgentOptions(cwd=repo, hooks=hook_matchers())

The attempt is the ambient one (``durability.attempt(...)``) when there is
one; otherwise it comes from the environment and the SDK's input, as for the
command-line hook: run = ``$DURABILITY_RUN_ID`` or the session id, node =
``$DURABILITY_NODE_ID`` or ``session``, worktree = ``$DURABILITY_WORKTREE`` or
the input's ``cwd``.  Request ids are derived as the command-line hook derives
them, so a tool call reported both here and by an installed plugin is recorded
once.  The callback never blocks the agent: it always answers ``{}``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher
from claude_agent_sdk.types import HookEvent

from durability.config import Settings
from durability.ground import ids
from durability.hook.entry import agent_identity, nested_worktree, tool_label
from durability.integrations.wrap import AmbientAttempt, current_attempt
from durability.store import AttemptKey

__all__ = ["EVENTS", "hook_matchers", "post_tool_use"]

log = logging.getLogger("durability.integrations.sdk")
EVENTS: tuple[HookEvent, ...] = ("PostToolUse", "PostToolUseFailure")
# Seconds the SDK waits for the callback: a capture is well under a second;
# past this the SDK moves on and the capture still finishes in its thread.
DEFAULT_TIMEOUT_S = 30.0


async def post_tool_use(input_data: HookInput, tool_use_id: str | None,
                        context: HookContext) -> HookJSONOutput:
    """Capture the worktree after a tool call the SDK reports."""
    try:
        await asyncio.to_thread(_capture, dict(input_data), tool_use_id, current_attempt(),
                                os.environ)
    except Exception as exc:  # the agent must never see a capture problem
        log.warning("durability: snapshot after tool call failed: %s", exc)
    return {}


def hook_matchers(*, timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[HookEvent, list[HookMatcher]]:
    """``{event: [HookMatcher]}`` for ``ClaudeAgentOptions(hooks=...)``: every tool."""
    return {event: [HookMatcher(matcher=None, hooks=[post_tool_use], timeout=timeout_s)]
            for event in EVENTS}


def _capture(payload: dict[str, Any], tool_use_id: str | None, ambient: AmbientAttempt | None,
             env: Mapping[str, str]) -> None:
    from durability.integrations.wrap import capture_after

    if ambient is None:
        ambient = _from_payload(payload, env)
        if ambient is None:
            return
    tool_use_id = tool_use_id or payload.get("tool_use_id")
    call_id = tool_use_id[:200] if isinstance(tool_use_id, str) and tool_use_id else None
    label = tool_label(payload, str(ambient.worktree)) or "tool"
    k = ambient.key
    request_id = (ids.call_request_id(k.run_id, k.node_id, k.iteration, k.attempt, call_id,
                                      payload.get("hook_event_name")) if call_id else None)
    capture_after(ambient, label, call_id, request_id=request_id, source="hook",
                  agent=agent_identity(payload))


def _from_payload(payload: dict[str, Any], env: Mapping[str, str]) -> AmbientAttempt | None:
    run_id = env.get("DURABILITY_RUN_ID") or payload.get("session_id")
    cwd = env.get("DURABILITY_WORKTREE") or payload.get("cwd")
    if not ids.is_valid_id(run_id) or not isinstance(cwd, str) or not os.path.isabs(cwd):
        log.warning("durability: SDK hook input has no usable session id or cwd")
        return None
    try:
        key = AttemptKey(str(run_id), ids.validate_id(env.get("DURABILITY_NODE_ID") or "session",
                                                      "node id"),
                         ids.validate_count(env.get("DURABILITY_ITERATION", "0"), "iteration", 0),
                         ids.validate_count(env.get("DURABILITY_ATTEMPT", "1"), "attempt", 1))
    except ValueError as exc:
        log.warning("durability: %s", exc)
        return None
    # A file tool's call inside a repository nested in the worktree is
    # captured there, as by the CLI hook (durability.hook.entry._nested_root).
    where = cwd if env.get("DURABILITY_WORKTREE") else nested_worktree(payload, cwd, env) or cwd
    return AmbientAttempt(key, Path(where), Settings.from_env(env))
