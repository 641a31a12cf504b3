"""The README's exit-status table says what ``errors._EXIT_CODES`` says, code
for code, so the documented status of a code cannot drift from the real one."""

from __future__ import annotations

import re
from pathlib import Path

from durability.ground import errors

README = Path(__file__).resolve().parents[3] / "README.md"


def documented_statuses(readme: str) -> dict[str, int]:
    """Code -> status from the README's `| status | codes |` table.

    A row whose first cell is one number gives it to every code in the row; in
    a row of several statuses each code's is the number after its group
    (`` `A`, `B` 15 ``)."""
    section = readme[readme.index("| status | codes |"):]
    found: dict[str, int] = {}
    for row in section.splitlines()[2:]:
        if not row.startswith("|"):
            break
        first, rest = row.strip("|").split("|", 1)
        if first.strip().isdigit():
            # Only the codes before any "(...)" remark: a remark may name an extra.
            for code in re.findall(r"`([A-Za-z_-]+)`", re.sub(r"\([^)]*\)", "", rest)):
                found[code] = int(first)
        else:
            for group, status in re.findall(r"((?:`[A-Z_]+`(?:, )?)+) (\d+)", rest):
                for code in re.findall(r"`([A-Z_]+)`", group):
                    found[code] = int(status)
    return found


def test_the_readme_table_is_the_exit_code_table() -> None:
    assert documented_statuses(README.read_text()) == errors._EXIT_CODES


def test_a_code_left_out_or_given_the_wrong_status_is_caught() -> None:
    table = ("| status | codes |\n|---|---|\n"
             "| 2 | `invalid-value` (a remark naming `tui`) |\n"
             "| 10-11 | `RUN_OWNER_ALIVE` 10, `A_B`, `C_D` 11 |\n\nafter\n")
    assert documented_statuses(table) == {
        "invalid-value": 2, "RUN_OWNER_ALIVE": 10, "A_B": 11, "C_D": 11}
