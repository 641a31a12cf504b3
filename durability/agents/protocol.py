"""The one small protocol every agent harness adapter implements.

The runner (``durability.runs``) owns the process: it asks the adapter for
the argv, environment and stdin of one headless invocation, starts it in its
own process group in the task's worktree, feeds each stdout line to
``parse`` as it arrives (folding ``Usage`` into the run's budget the moment
it is seen, acting on ``QuotaSignal``), and hands the whole event list and
the exit status to ``finish`` for the attempt's verdict.

Additive changes only: an adapter written against this file keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "AgentRequest", "Event", "Final", "Harness", "QuotaSignal", "ToolCall", "Usage",
]


@dataclass(frozen=True)
class AgentRequest:
    """One headless invocation of a harness."""

    prompt: str
    #: The task's worktree: the agent's working folder.
    worktree: Path
    #: A folder private to this attempt (outside the worktree) where the
    #: adapter may write its per-process settings, hook files, homes.
    private_dir: Path
    #: The hook command the harness runs for every tool call (argv), already
    #: carrying the attempt's identity in its environment (``hook_env``).
    hook_command: tuple[str, ...] = ()
    hook_env: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    #: Continue this session instead of starting one.
    resume_id: str | None = None
    #: The id to give a new session, where the harness lets us choose it.
    session_id: str | None = None
    #: A JSON schema the final answer must satisfy (``output=``'s schema).
    output_schema: dict[str, Any] | None = None
    max_turns: int | None = None


@dataclass(frozen=True)
class Usage:
    """Tokens spent by one response, by kind; ``cost_usd`` only when the
    harness itself reported it."""

    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return (self.input_tokens + self.output_tokens + self.cache_read_tokens
                + self.cache_write_tokens)


@dataclass(frozen=True)
class QuotaSignal:
    """A rate or usage limit that blocks this harness (never an "allowed"
    rate-limit notice); ``reset_at_ms`` None: no known reset."""

    message: str
    reset_at_ms: int | None = None


@dataclass(frozen=True)
class ToolCall:
    """A tool call the agent made (``completed`` once its result is seen)."""

    id: str
    name: str
    completed: bool = False


@dataclass(frozen=True)
class Event:
    """What one stream line meant; several may come of one line.

    ``kind`` is one of: ``session`` (``session_id`` known), ``usage``,
    ``tool_call``, ``tool_result``, ``message`` (assistant text), ``retry``
    (a transient API error the CLI retries itself), ``quota``, ``result``
    (the final answer), ``error``.
    """

    kind: str
    session_id: str | None = None
    usage: Usage | None = None
    tool: ToolCall | None = None
    text: str | None = None
    quota: QuotaSignal | None = None
    #: The raw decoded line, for the attempt's log (already size-capped).
    raw: dict[str, Any] | None = None


@dataclass(frozen=True)
class Final:
    """The verdict on one invocation."""

    ok: bool
    session_id: str | None
    #: The final answer: structured output when the harness gave one, else
    #: the last message's text.
    text: str | None = None
    structured: Any = None
    num_turns: int | None = None
    #: The harness's own cost figure, to reconcile the price table with.
    reported_cost_usd: float | None = None
    error: str | None = None
    #: The session asked for could not be resumed ("No conversation found",
    #: an unknown thread, no transcript): start fresh.
    session_lost: bool = False
    quota: QuotaSignal | None = None


class Harness(Protocol):
    """One agent CLI."""

    #: ``claude``, ``codex`` or ``gemini``.
    name: str
    #: The executable looked up on PATH unless the config names another.
    executable: str

    def argv(self, request: AgentRequest, executable: str) -> list[str]:
        """The full argv of one headless invocation (never through a shell)."""
        ...

    def env(self, request: AgentRequest, base: dict[str, str]) -> dict[str, str]:
        """The environment: ``base`` plus what this harness needs (private
        settings and homes under ``request.private_dir``)."""
        ...

    def stdin(self, request: AgentRequest) -> bytes | None:
        """Bytes to write to the process's stdin (then closed), or None."""
        ...

    def prepare(self, request: AgentRequest) -> None:
        """Write the per-process hook settings (never the user's own files)."""
        ...

    def parse(self, line: str) -> list[Event]:
        """The events of one stdout line; [] for what carries nothing."""
        ...

    def finish(self, events: list[Event], returncode: int, stderr_head: str) -> Final:
        """The verdict, from every event seen and the exit status."""
        ...
