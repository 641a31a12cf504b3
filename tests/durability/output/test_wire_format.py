"""The wire format, pinned: the keys (in order), the JSON types and null
against absent of every ``--json`` answer of the CLI and of every MCP tool's
answer and schemas, over one worktree with a little of everything
(``scenario``).  The pins (``*_wire.json``, ``mcp_schemas.json``) were taken
on the code before the output models were shared; an answer that differs by
one key fails here.  A deliberate change of the format rewrites a pin in
the same commit (``python -m tests.durability.output.pin``, reviewed)."""

from __future__ import annotations

from pathlib import Path

from tests.durability.output import scenario, wirekit

HERE = Path(__file__).parent


def _pinned(name: str) -> str:
    return (HERE / name).read_text()


def test_every_cli_json_answer_keeps_its_shape(tmp_path: Path) -> None:
    got = scenario.cli_answers(tmp_path)
    assert wirekit.text({k: wirekit.shape(v) for k, v in got.items()}) == _pinned(
        "cli_wire.json")


def test_every_mcp_answer_keeps_its_shape(tmp_path: Path) -> None:
    got = scenario.mcp_answers(tmp_path)
    assert wirekit.text({k: wirekit.shape(v) for k, v in got.items()}) == _pinned(
        "mcp_wire.json")


def test_every_mcp_tool_keeps_its_schemas() -> None:
    assert wirekit.text(scenario.mcp_schemas()) == _pinned("mcp_schemas.json")


def test_a_shape_tells_null_from_absent_and_key_order() -> None:
    # The pins can fail: a null is not an absent key, and order counts.
    assert wirekit.shape({"a": None}) != wirekit.shape({})
    assert wirekit.text(wirekit.shape({"a": 1, "b": "x"})) != wirekit.text(
        wirekit.shape({"b": "x", "a": 1}))
    assert wirekit.shape([1, 2, None]) == ["int", "null"]
    assert wirekit.shape({"f": 1.0, "t": True}) == {"f": "float", "t": "bool"}
