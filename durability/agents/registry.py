"""The harnesses by name: ``harness("claude")`` is a fresh adapter for one
invocation (an adapter's ``parse`` keeps what it has folded so far)."""

from __future__ import annotations

from collections.abc import Callable

from durability.agents.claude import ClaudeCode
from durability.agents.protocol import Harness
from durability.ground.errors import InvalidInput

__all__ = ["HARNESSES", "harness", "names"]

#: Each harness's adapter factory.  Codex and Gemini register here, beside
#: Claude Code: ``"codex": CodexCli``, ``"gemini": GeminiCli``.
HARNESSES: dict[str, Callable[[], Harness]] = {
    "claude": ClaudeCode,
}


def names() -> tuple[str, ...]:
    return tuple(HARNESSES)


def harness(name: str) -> Harness:
    """A new adapter for the harness ``name``."""
    try:
        factory = HARNESSES[name]
    except KeyError:
        raise InvalidInput(f"unknown harness {name!r}: use one of "
                           f"{', '.join(HARNESSES)}") from None
    return factory()
