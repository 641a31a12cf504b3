"""Every DURABILITY_* variable the code reads is in the one table
(``config.ENVIRONMENT_VARIABLES``) and in the environment reference
(docs/reference/environment.md, generated from that table)."""

from __future__ import annotations

import re
from pathlib import Path

from durability.config import ENVIRONMENT_VARIABLES

ROOT = Path(__file__).resolve().parents[2]


def _named_in_code() -> set[str]:
    found: set[str] = set()
    for folder in ("durability",):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".sh"}:
                found |= set(re.findall(r"DURABILITY_[A-Z][A-Z_]*[A-Z]", path.read_text()))
    return found


def test_every_variable_in_the_code_is_in_the_table() -> None:
    assert _named_in_code() == set(ENVIRONMENT_VARIABLES)


def test_every_variable_of_the_table_is_in_the_reference() -> None:
    page = (ROOT / "docs" / "reference" / "environment.md").read_text()
    missing = {name for name in ENVIRONMENT_VARIABLES if f"| `{name}` |" not in page}
    assert missing == set()
