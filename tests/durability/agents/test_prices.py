"""The price table: Claude Code's own figures, names as CLIs report them,
unknown models cost None, overrides from config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.agents.claude import ClaudeCode
from durability.agents.prices import PRICES, Price, PriceTable, cost
from durability.agents.protocol import Usage
from durability.ground.errors import InvalidInput

FIXTURES = Path(__file__).parent / "fixtures" / "claude"


@pytest.mark.parametrize("name", ["two_calls", "two_blocks", "structured", "max_turns",
                                  "overloaded_then_ok"])
def test_our_cost_of_a_recorded_stream_is_the_cost_claude_code_reported(name: str) -> None:
    adapter = ClaudeCode()
    events = [e for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()
              for e in adapter.parse(line)]
    ours = [cost(e.usage) for e in events if e.usage is not None]
    assert ours and None not in ours
    reported = adapter.finish(events, 0, "").reported_cost_usd
    assert reported and sum(c for c in ours if c is not None) == pytest.approx(reported)


@pytest.mark.parametrize("model,expected", [
    ("claude-opus-4-8", "claude-opus-4-8"), ("claude-opus-4-8[1m]", "claude-opus-4-8"),
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("us.anthropic.claude-haiku-4-5", "claude-haiku-4-5"),
    ("claude-opus-4-1-20250805", "claude-opus-4-1"), ("openai/gpt-5-codex", "gpt-5-codex"),
    ("gpt-5-mini-2025-08-07", "gpt-5-mini"), ("models/gemini-2.5-pro", "gemini-2.5-pro"),
])
def test_model_names_as_clis_report_them(model: str, expected: str) -> None:
    assert PriceTable().price(model) == PRICES[expected]


@pytest.mark.parametrize("model", [None, "", "gpt-9", "gpt-5.9", "my-local-llama"])
def test_an_unknown_model_costs_none(model: str | None) -> None:
    assert cost(Usage(model, 1000, 1000)) is None


def test_cost_by_kind() -> None:
    usage = Usage("claude-sonnet-4-5", 1_000_000, 1_000_000, 1_000_000, 1_000_000)
    assert cost(usage) == pytest.approx(3 + 15 + 0.3 + 3.75)


def test_overrides_change_one_kind_or_add_a_model() -> None:
    table = PriceTable().with_overrides(json.loads(
        '{"claude-sonnet-4-5": {"output": 20}, '
        '"my-llm": {"input": 1, "output": 2, "cache_read": 0, "cache_write": 1}}'))
    assert table.price("claude-sonnet-4-5") == Price(3, 20, 0.3, 3.75)
    assert table.cost(Usage("my-llm", 1_000_000, 1_000_000)) == pytest.approx(3)
    assert PriceTable().price("claude-sonnet-4-5") == Price(3, 15, 0.3, 3.75)  # ours unchanged


@pytest.mark.parametrize("bad", [{"x": {"input": 1}}, {"gpt-5": {"inptu": 1}},
                                 {"gpt-5": {"input": -1}}, {"gpt-5": {"input": "1"}},
                                 {"gpt-5": 3}])
def test_bad_overrides_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidInput):
        PriceTable().with_overrides(bad)
