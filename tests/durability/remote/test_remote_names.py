"""A remote's name is a component of git refs on this machine
(``refs/durability/remotes/NAME/``): a name git cannot hold there is refused
when it is given, not when a restore needs it (docs/how-to/remote.md)."""

from __future__ import annotations

import pytest

from durability.ground import ids
from tests.helpers import cli


@pytest.mark.parametrize("name", ["a..b", "backup.", "backup.lock"])
def test_names_git_refuses_in_a_ref_are_refused(name: str) -> None:
    with pytest.raises(ValueError):
        ids.remote_name(name)


@pytest.mark.parametrize("name", ["backup", "b.a-c_k", "v1.2"])
def test_dotted_names_git_takes_are_taken(name: str) -> None:
    assert ids.remote_name(name) == name


def test_the_command_refuses_such_a_name_in_one_line() -> None:
    done = cli("remote", "add", "backup.lock", "/srv/backup.git")
    assert done.returncode == 2 and done.stderr.startswith("durability: invalid-value: ")
    assert done.stderr.count("\n") == 1
