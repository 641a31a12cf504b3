"""The harness adapters by name.

Adapters keep state across one invocation's stream (Codex reports a running
token total, Gemini's answer is the text after the last tool result, Claude
Code's usage is folded once per message), so ``harness(name)`` makes a fresh
one each time.
"""

from __future__ import annotations

from collections.abc import Callable

from durability.agents.claude import ClaudeCode
from durability.agents.codex import CodexHarness
from durability.agents.gemini import GeminiHarness
from durability.agents.protocol import Harness
from durability.ground.errors import InvalidInput

__all__ = ["HARNESSES", "harness", "names"]

#: Each harness's adapter factory, in the order a default chain tries them.
HARNESSES: dict[str, Callable[[], Harness]] = {
    "claude": ClaudeCode,
    "codex": CodexHarness,
    "gemini": GeminiHarness,
}


def names() -> tuple[str, ...]:
    return tuple(HARNESSES)


def harness(name: str) -> Harness:
    """A fresh adapter for the harness ``name``."""
    try:
        factory = HARNESSES[name]
    except KeyError:
        raise InvalidInput(f"unknown harness {name!r}: use one of "
                           f"{', '.join(HARNESSES)}") from None
    return factory()
