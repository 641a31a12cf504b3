"""DURABILITY_INFORMED_WORKTREES and DURABILITY_INFORMED_WATCHES: the bounds of
the service's internal watches (docs/explanation/git-backend.md)."""

from __future__ import annotations

import pytest

from durability.config import DEFAULT_INFORMED_WORKTREES, Settings
from durability.ground.errors import InvalidInput


def test_defaults_and_values_and_their_way_to_a_child() -> None:
    default = Settings.from_env({})
    assert (default.informed_worktrees, default.informed_watches) == (
        DEFAULT_INFORMED_WORKTREES, None)
    env = {"DURABILITY_INFORMED_WORKTREES": "0", "DURABILITY_INFORMED_WATCHES": " 500 "}
    chosen = Settings.from_env(env)
    assert (chosen.informed_worktrees, chosen.informed_watches) == (0, 500)
    again = Settings.from_env(chosen.to_env())
    assert (again.informed_worktrees, again.informed_watches) == (0, 500)


@pytest.mark.parametrize("value", ["-1", "many", "1e3", "1234567890"])
def test_a_value_that_is_not_a_whole_number_is_refused_by_name(value: str) -> None:
    with pytest.raises(InvalidInput, match="DURABILITY_INFORMED_WATCHES"):
        Settings.from_env({"DURABILITY_INFORMED_WATCHES": value})
