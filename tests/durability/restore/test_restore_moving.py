"""A restore never writes over a tree its pre-restore capture could not read
to rest: a path still changing after every retry (or, for jj, the whole
tree) holds content no checkpoint has, so the restore is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.backends import MOVING, Skipped
from durability.backends.git import GitBackend
from durability.ground.errors import RestoreError
from durability.restore.guard import refuse_unrecorded
from tests.helpers import make_git_repo, run_cli_json


@pytest.fixture
def two(tmp_path: Path) -> tuple[Path, str, str]:
    repo = make_git_repo(tmp_path / "repo").resolve()
    (repo / "a.txt").write_text("one\n")
    (repo / "b.txt").write_text("same\n")
    one = run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n")["commit_id"]
    (repo / "a.txt").write_text("two\n")
    two = run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n")["commit_id"]
    return repo, one, two


def test_a_moving_path_the_restore_would_write_is_refused(two: tuple[Path, str, str]) -> None:
    repo, one, now = two
    with pytest.raises(RestoreError, match="still changing") as caught:
        refuse_unrecorded(GitBackend(), repo, now, one, [Skipped("a.txt", MOVING)])
    assert caught.value.code == "restore-conflict" and "a.txt" in str(caught.value)


def test_a_moving_path_the_restore_leaves_alone_does_not_block(
        two: tuple[Path, str, str]) -> None:
    repo, one, now = two
    refuse_unrecorded(GitBackend(), repo, now, one, [Skipped("b.txt", MOVING)])


def test_a_whole_tree_still_moving_blocks_every_restore(two: tuple[Path, str, str]) -> None:
    repo, one, now = two
    with pytest.raises(RestoreError, match="the whole tree"):
        refuse_unrecorded(GitBackend(), repo, now, one, [Skipped("", MOVING)])
    with pytest.raises(RestoreError, match="the whole tree"):
        refuse_unrecorded(GitBackend(), repo, now, one, [Skipped("", MOVING)], ["a.txt"])
