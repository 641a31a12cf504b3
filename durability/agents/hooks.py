"""Which hook events each harness fires for a tool call, and the shape of one
hook entry in its settings: the one table both ``install-hook`` (the user's
own settings files, ``durability.install.harnesses``) and the adapters (an
agent process's private settings) build from.

Claude Code: ``PreToolUse``, ``PostToolUse``, ``PostToolUseFailure`` and
``PermissionDenied``, timeout in seconds.  OpenAI Codex CLI: ``PreToolUse``,
``PostToolUse`` and ``Stop``, seconds.  Gemini CLI: ``BeforeTool`` and
``AfterTool``, milliseconds.  The pre-call event captures nothing: it
announces the call, so that one killed before its post-call hook is a
``call-unfinished`` gap (``durability.gaps.calls``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CLAUDE_EVENTS", "DENIED_EVENTS", "HOOKS", "HOOK_TIMEOUT_S", "PRE_CALL_EVENTS",
           "HookSpec"]

#: Post-tool events: a failed tool (a Bash command that exited non-zero) may
#: still have written files.  Before them the pre-call event, which announces
#: the call (an install without it simply has no call-unfinished gaps), and
#: Claude Code's PermissionDenied: a call its auto mode refused is over, no gap.
CLAUDE_EVENTS = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied")
#: Each harness's pre-call event (``doctor`` warns of an install without it).
PRE_CALL_EVENTS = frozenset({"PreToolUse", "BeforeTool"})
#: Events that end a call refused before it ran (``doctor`` says what their lack costs).
DENIED_EVENTS = frozenset({"PermissionDenied"})
# Seconds the harness waits for the hook: above the hook's own 10 s budget, so
# the hook always finishes (and files its gap) before the harness kills it.
HOOK_TIMEOUT_S = 15


@dataclass(frozen=True)
class HookSpec:
    """The hook events of one harness and the shape of our entry."""

    events: tuple[str, ...]
    #: The matcher of the group we add (None: the key is left out).
    matcher: str | None
    #: The timeout as the harness counts it.
    timeout: int
    #: Extra fields of the handler (Gemini CLI names each hook).
    extra: tuple[tuple[str, str], ...] = ()

    def entry(self, command: str) -> dict[str, Any]:
        return {"type": "command", **dict(self.extra), "command": command,
                "timeout": self.timeout}

    def group(self, command: str) -> dict[str, Any]:
        group: dict[str, Any] = {} if self.matcher is None else {"matcher": self.matcher}
        return {**group, "hooks": [self.entry(command)]}

    def hooks(self, command: str) -> dict[str, list[dict[str, Any]]]:
        """A settings file's whole ``hooks`` object holding only our entry."""
        return {event: [self.group(command)] for event in self.events}


HOOKS = {
    "claude": HookSpec(CLAUDE_EVENTS, "*", HOOK_TIMEOUT_S),
    # Codex matches every tool when a group has no matcher.
    # Stop too: an apply_patch Codex runs from a shell command fires no
    # PostToolUse, so the edit a turn ends with is captured at the turn's end.
    "codex": HookSpec(("PreToolUse", "PostToolUse", "Stop"), None, HOOK_TIMEOUT_S),
    # Gemini CLI counts its timeout in milliseconds; its matcher is a regex.
    "gemini": HookSpec(("BeforeTool", "AfterTool"), ".*", HOOK_TIMEOUT_S * 1000,
                       (("name", "durability"),)),
}
