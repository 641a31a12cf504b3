"""The in-process wrapper (source ``wrap``): capture after every tool call of
an agent that runs inside this Python process.

``attempt(...)`` sets the ambient attempt for the code inside it (a
``contextvars.ContextVar``, so asyncio tasks created inside inherit it);
``durable_tool`` wraps a sync or async tool so that every call is followed by
a capture labelled with the tool's name and a fresh call id, also when the
tool raises (the exception propagates unchanged).  Outside an ambient attempt
a wrapped tool is just called.

Threads: ``threading.Thread`` does *not* copy the creating thread's context
(before Python 3.14), so a thread started inside ``attempt(...)`` sees no
ambient attempt.  Start it with ``durability.Thread`` (a ``threading.Thread``
that runs in a copy of its creator's context), or wrap its target with
``bind_context``, which also suits ``ThreadPoolExecutor.submit``.

Captures go through the service when one answers and in this process
otherwise (the same per-worktree lock); a capture that fails is a gap, never
an exception in the tool's caller.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from durability.config import Settings
from durability.ground import ids
from durability.ground.errors import InvalidInput
from durability.store import AttemptKey

if TYPE_CHECKING:
    from durability.capture.capturer import Outcome

__all__ = ["AmbientAttempt", "Thread", "attempt", "bind_context", "current_attempt",
           "durable_tool"]

log = logging.getLogger("durability.integrations.wrap")
P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class AmbientAttempt:
    """The attempt, worktree and settings captures are made for."""

    key: AttemptKey
    worktree: Path
    settings: Settings


_current: contextvars.ContextVar[AmbientAttempt | None] = contextvars.ContextVar(
    "durability_attempt", default=None)


@contextmanager
def attempt(run_id: str, node_id: str, *, worktree: str | os.PathLike[str] = ".",
            iteration: int = 0, attempt: int = 1,
            settings: Settings | None = None) -> Iterator[AmbientAttempt]:
    """Make ``(run_id, node_id, iteration, attempt)`` in ``worktree`` the
    ambient attempt of the code inside the ``with`` block."""
    try:
        key = AttemptKey(ids.validate_id(run_id, "run id"), ids.validate_id(node_id, "node id"),
                         ids.validate_count(iteration, "iteration", 0),
                         ids.validate_count(attempt, "attempt", 1))
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    ambient = AmbientAttempt(key, Path(os.path.abspath(worktree)),
                             settings or Settings.from_env())
    token = _current.set(ambient)
    try:
        yield ambient
    finally:
        _current.reset(token)


def current_attempt() -> AmbientAttempt | None:
    """The ambient attempt here, or None."""
    return _current.get()


@overload
def durable_tool(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def durable_tool(*, name: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def durable_tool(fn: Any = None, /, *, name: str | None = None) -> Any:
    """Decorate a tool (sync or async) to capture the worktree after each call."""
    if fn is None:
        return functools.partial(_wrap, name=name)
    return _wrap(fn, name=name)


def _is_async(fn: Callable[..., Any]) -> bool:
    """A coroutine function, or a tool object whose ``__call__`` is one (its
    work happens when awaited, so the capture must come after the await)."""
    # Not callable(): the question is what kind of callable the class defines.
    call = getattr(type(fn), "__call__", None)  # noqa: B004
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call)


def _wrap(fn: Callable[..., Any], *, name: str | None) -> Callable[..., Any]:
    label = (name or getattr(fn, "__name__", None) or type(fn).__name__ or "tool")[:1000]
    if _is_async(fn):
        @functools.wraps(fn)
        async def async_tool(*args: Any, **kwargs: Any) -> Any:
            ambient = _current.get()
            if ambient is None:
                return await fn(*args, **kwargs)
            try:
                return await fn(*args, **kwargs)
            finally:
                await asyncio.to_thread(capture_after, ambient, label)

        return async_tool

    @functools.wraps(fn)
    def tool(*args: Any, **kwargs: Any) -> Any:
        ambient = _current.get()
        if ambient is None:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            capture_after(ambient, label)

    return tool


def capture_after(ambient: AmbientAttempt, label: str, call_id: str | None = None, *,
                  request_id: str | None = None, source: str = "wrap",
                  agent: dict[str, str] | None = None) -> Outcome | None:
    """Capture for one tool call; its ``Outcome``, or None when it became a gap.
    ``agent``: who made the call (``harness``, ``agent_id``, ``agent_type``)."""
    from durability.capture.snapshot import snapshot_now

    call_id = call_id or uuid.uuid4().hex
    request_id = request_id or f"{source}-{call_id}"
    try:
        return snapshot_now(ambient.settings, key=ambient.key, path=ambient.worktree,
                            request_id=request_id, label=label, source=source,
                            tool_use_id=call_id, agent=agent)
    except Exception as exc:  # never let a capture break the agent's tool call
        code = getattr(exc, "code", "internal-error")
        log.warning("durability: capture after %s not taken (%s): %s", label, code, exc)
        if code in ("timeout", "internal-error", "service-unreachable"):
            _gap(ambient, request_id, call_id, str(code), str(exc), source)
        return None


def _gap(ambient: AmbientAttempt, request_id: str, call_id: str, reason: str,
         detail: str, source: str) -> None:
    """File the gap the capture path did not (a timeout, an unexpected error)."""
    from durability.gaps import spool
    from durability.gaps.ingest import write_gap

    k = ambient.key
    record = spool.gap_record(run_id=k.run_id, request_id=request_id, reason=reason,
                              node_id=k.node_id, iteration=k.iteration, attempt=k.attempt,
                              worktree=str(ambient.worktree), source=source,
                              tool_use_id=call_id, detail=detail)
    write_gap(ambient.settings, record)


def bind_context(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` bound to a copy of the current context (and so the ambient
    attempt), for threads and executors."""
    context = contextvars.copy_context()

    @functools.wraps(fn)
    def bound(*args: P.args, **kwargs: P.kwargs) -> R:
        return context.run(fn, *args, **kwargs)

    return bound


class Thread(threading.Thread):
    """A ``threading.Thread`` that runs in a copy of its creator's context."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._durability_context = contextvars.copy_context()

    def run(self) -> None:
        self._durability_context.run(super().run)
