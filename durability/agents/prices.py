"""What a model's tokens cost: a table we keep, per model, in US dollars per
million tokens by kind (input, output, cache read, cache write).

Written 2026-12-02.  The Claude rows are the table the pinned Claude Code
2.1.197 itself prices with (read from its binary; its ``total_cost_usd`` on
the stand-in's streams agrees to the last digit, see
tests/durability/agents/test_prices.py).  The OpenAI (Codex) and Gemini rows
are those vendors' published list prices for the first tier (Gemini's
prompts up to 200k tokens) as last checked when this was written: check
them, and override what differs from config (``PriceTable.with_overrides``,
which the engine wires).  No network: nothing here is fetched.

A model not in the table costs None, never 0: the engine reports the run's
cost as unknown rather than under-count it.  Names are matched after
dropping a provider prefix (``us.anthropic.``, ``openai/``, ``models/``), a
context tag (``[1m]``) and a date suffix, then by the longest table name
the model's name starts with (``claude-opus-4-8-20261101`` is
``claude-opus-4-8``).

Usage kinds are the protocol's: ``input_tokens`` excludes the cached ones
(``cache_read_tokens``), as Claude Code reports them; an adapter whose CLI
counts cached tokens inside its input (Codex's ``input_tokens`` with
``cached_input_tokens``) subtracts them first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from durability.agents.protocol import Usage
from durability.ground.errors import InvalidInput

__all__ = ["PRICES", "TABLE_DATE", "Price", "PriceTable", "cost"]

TABLE_DATE = "2026-12-02"


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens, by kind."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: Usage) -> float:
        return (usage.input_tokens * self.input + usage.output_tokens * self.output
                + usage.cache_read_tokens * self.cache_read
                + usage.cache_write_tokens * self.cache_write) / 1_000_000


# Claude Code 2.1.197's own tiers (cache write: the 5-minute cache).
_HAIKU_35 = Price(0.8, 4, 0.08, 1)
_HAIKU_45 = Price(1, 5, 0.1, 1.25)
_SONNET = Price(3, 15, 0.3, 3.75)
_OPUS_4 = Price(15, 75, 1.5, 18.75)
_OPUS_45 = Price(5, 25, 0.5, 6.25)
_FABLE = Price(10, 50, 1, 12.5)

PRICES: dict[str, Price] = {
    "claude-3-5-haiku": _HAIKU_35,
    "claude-haiku-4-5": _HAIKU_45,
    "claude-3-5-sonnet": _SONNET, "claude-3-7-sonnet": _SONNET,
    "claude-sonnet-4-0": _SONNET, "claude-sonnet-4": _SONNET, "claude-sonnet-4-5": _SONNET,
    "claude-sonnet-4-6": _SONNET, "claude-sonnet-5": _SONNET,
    "claude-opus-4-0": _OPUS_4, "claude-opus-4": _OPUS_4, "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-5": _OPUS_45, "claude-opus-4-6": _OPUS_45, "claude-opus-4-7": _OPUS_45,
    "claude-opus-4-8": _OPUS_45,
    "claude-fable-5": _FABLE, "claude-mythos-5": _FABLE,
    # OpenAI (Codex CLI); caching has no write surcharge: a write is input.
    "gpt-5": Price(1.25, 10, 0.125, 1.25),
    "gpt-5-codex": Price(1.25, 10, 0.125, 1.25),
    "gpt-5-mini": Price(0.25, 2, 0.025, 0.25),
    "gpt-5-nano": Price(0.05, 0.4, 0.005, 0.05),
    "gpt-5.1": Price(1.25, 10, 0.125, 1.25),
    "gpt-5.1-codex": Price(1.25, 10, 0.125, 1.25),
    "gpt-5.1-codex-mini": Price(0.25, 2, 0.025, 0.25),
    "gpt-5.2": Price(1.75, 14, 0.175, 1.75),
    "gpt-4.1": Price(2, 8, 0.5, 2),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1, 0.4),
    "o3": Price(2, 8, 0.5, 2),
    "o4-mini": Price(1.1, 4.4, 0.275, 1.1),
    "codex-mini-latest": Price(1.5, 6, 0.375, 1.5),
    # Gemini (prompts up to 200k tokens); implicit caching: a write is input.
    "gemini-2.5-pro": Price(1.25, 10, 0.125, 1.25),
    "gemini-2.5-flash": Price(0.3, 2.5, 0.03, 0.3),
    "gemini-2.5-flash-lite": Price(0.1, 0.4, 0.01, 0.1),
    "gemini-3-pro-preview": Price(2, 12, 0.2, 2),
    "gemini-3-pro": Price(2, 12, 0.2, 2),
    "gemini-3-flash-preview": Price(0.5, 3, 0.05, 0.5),
    "gemini-3-flash": Price(0.5, 3, 0.05, 0.5),
}

_PREFIX = re.compile(r"^(?:[a-z]{2}\.)?(?:anthropic[./]|openai/|google/|models/)")
_TAG = re.compile(r"\[[^\]]*\]$")
_DATE = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")
_KINDS = ("input", "output", "cache_read", "cache_write")


class PriceTable:
    """The table, with a deployment's overrides."""

    def __init__(self, prices: Mapping[str, Price] | None = None) -> None:
        self.prices = dict(PRICES if prices is None else prices)

    def with_overrides(self, overrides: Mapping[str, Any]) -> PriceTable:
        """A table with ``overrides`` (from config) applied: ``{model:
        {"input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75}}``,
        per million tokens; a known model may name only the kinds that change."""
        prices = dict(self.prices)
        for model, given in overrides.items():
            if not isinstance(given, Mapping) or set(given) - set(_KINDS):
                raise InvalidInput(f"price of {model!r}: give a table of "
                                   f"{', '.join(_KINDS)} (USD per million tokens)")
            kinds = {k: _number(model, k, v) for k, v in given.items()}
            base = prices.get(model)
            if base is None and set(kinds) != set(_KINDS):
                raise InvalidInput(f"price of the new model {model!r}: give all of "
                                   f"{', '.join(_KINDS)}")
            prices[model] = replace(base, **kinds) if base else Price(**kinds)
        return PriceTable(prices)

    def price(self, model: str | None) -> Price | None:
        """The price of ``model``; None when the table does not know it."""
        if not model:
            return None
        if model in self.prices:
            return self.prices[model]
        name = _DATE.sub("", _TAG.sub("", _PREFIX.sub("", model.strip().lower())))
        if name in self.prices:
            return self.prices[name]
        known = [k for k in self.prices if name.startswith(k + "-")]
        return self.prices[max(known, key=len)] if known else None

    def cost(self, usage: Usage) -> float | None:
        """What ``usage`` cost in US dollars; None for a model not in the table."""
        price = self.price(usage.model)
        return None if price is None else price.cost(usage)


_DEFAULT = PriceTable()


def cost(usage: Usage, table: PriceTable | None = None) -> float | None:
    """What ``usage`` cost by ``table`` (default: ours); None when unknown."""
    return (table or _DEFAULT).cost(usage)


def _number(model: str, kind: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InvalidInput(f"price of {model!r}: {kind} must be a number >= 0, not {value!r}")
    return float(value)
