"""The exit-code reference (docs/reference/exit-codes.md) says what
``errors._EXIT_CODES`` says, code for code, so the documented status of a code
cannot drift from the real one.  (The page is generated from that table:
tests/test_reference_docs.py checks it is current; this reads it as a user does.)"""

from __future__ import annotations

import re
from pathlib import Path

from durability.ground import errors

REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "reference" / "exit-codes.md"


def documented_statuses(page: str) -> dict[str, int]:
    """Code -> status from the page's `| status | codes | meaning |` table: each
    code in a row's codes cell has the row's status."""
    section = page[page.index("| status | codes |"):]
    found: dict[str, int] = {}
    for row in section.splitlines()[2:]:
        if not row.startswith("|"):
            break
        status, codes = row.strip("|").split("|")[:2]
        for code in re.findall(r"`([A-Za-z_-]+)`", codes):
            assert code not in found, f"{code} is in two rows"
            found[code] = int(status)
    return found


def test_the_reference_table_is_the_exit_code_table() -> None:
    assert documented_statuses(REFERENCE.read_text()) == errors._EXIT_CODES


def test_a_code_left_out_or_given_the_wrong_status_is_caught() -> None:
    table = ("| status | codes | meaning |\n|---|---|---|\n"
             "| 2 | `invalid-value` | a remark naming `tui` |\n"
             "| 11 | `A_B`, `C_D` | x |\n\nafter\n| 3 | `not-found` | |\n")
    assert documented_statuses(table) == {"invalid-value": 2, "A_B": 11, "C_D": 11}
    assert documented_statuses(table) != errors._EXIT_CODES
