"""Rewrite the wire-format pins from the code as it is (a deliberate
format change only; review the diff): ``python -m tests.durability.output.pin``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def test_pin_cli(tmp_path: Path) -> None:
    _write("cli_wire.json", "cli", tmp_path)


def test_pin_mcp(tmp_path: Path) -> None:
    _write("mcp_wire.json", "mcp", tmp_path)


def test_pin_schemas() -> None:
    from tests.durability.output import scenario, wirekit

    (HERE / "mcp_schemas.json").write_text(wirekit.text(scenario.mcp_schemas()))


def _write(name: str, which: str, tmp_path: Path) -> None:
    from tests.durability.output import scenario, wirekit

    got = getattr(scenario, f"{which}_answers")(tmp_path)
    (HERE / name).write_text(wirekit.text({k: wirekit.shape(v) for k, v in got.items()}))


if __name__ == "__main__":
    # Through pytest: the same private environment (HOME, state, jj) as the test.
    sys.exit(pytest.main([__file__, "-q", "-p", "no:cacheprovider"]))
