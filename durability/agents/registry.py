"""The harness adapters by name.

Adapters keep state across one invocation's stream (Codex reports a running
token total, Gemini's answer is the text after the last tool result), so
``harness(name)`` makes a fresh one each time.  Claude Code's adapter is
registered here by its own room (``durability.agents.claude``) when present.
"""

from __future__ import annotations

from collections.abc import Callable

from durability.agents.codex import CodexHarness
from durability.agents.gemini import GeminiHarness
from durability.agents.protocol import Harness
from durability.ground.errors import InvalidInput

__all__ = ["HARNESSES", "harness"]

HARNESSES: dict[str, Callable[[], Harness]] = {
    "codex": CodexHarness,
    "gemini": GeminiHarness,
}


def harness(name: str) -> Harness:
    """A fresh adapter for the harness ``name``."""
    try:
        factory = HARNESSES[name]
    except KeyError:
        raise InvalidInput(f"unknown harness {name!r}: use one of "
                           f"{', '.join(sorted(HARNESSES))}") from None
    return factory()
