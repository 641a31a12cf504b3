"""The MCP tools answer with the shared output models (``durability.output``),
the ones the CLI's ``--json`` prints: not a copy of them that could drift."""

from __future__ import annotations

import durability.output
from durability.mcp import models as m
from durability.mcp import tools


def test_every_tool_answers_with_a_shared_output_model() -> None:
    shared = {getattr(durability.output, name) for name in durability.output.__all__}
    for tool in [*tools.TOOLS, tools.APPROVE]:
        assert tool.output in shared, tool.name
        assert tool.output.__module__.startswith("durability.output."), tool.name


def test_the_mcp_models_outputs_are_the_shared_ones() -> None:
    outs = [name for name in m.__all__ if name.endswith("Out")]
    assert outs  # the names the tools and their callers import from here
    for name in outs:
        assert getattr(m, name) is getattr(durability.output, name), name


def test_the_mcp_models_hold_no_output_of_their_own() -> None:
    own = [name for name, value in vars(m).items()
           if isinstance(value, type) and value.__module__ == m.__name__
           and name.endswith("Out")]
    assert own == []
