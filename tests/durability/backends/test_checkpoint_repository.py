"""``Backend.checkpoint_repository``: which git store holds a worktree's
checkpoints, on both backends (jj colocated, jj not colocated, a second jj
workspace, plain git, a linked git worktree).  Real jj, real git, real pygit2:
each case takes a checkpoint and finds its commit in the repository named."""

from __future__ import annotations

from pathlib import Path

import pygit2
import pytest

from durability.backends import Stamp, backend_for, backend_name
from durability.backends.base import backend_type
from durability.backends.git import GitBackend, worktree_index
from durability.backends.jj import JjBackend
from durability.ground.errors import JjFailed, WorktreeMissing
from durability.store import AttemptKey
from tests.helpers import git, jj, make_git_repo, make_jj_repo

KEY = AttemptKey("run-cr", "node", 0, 1)


def _checkpoint(worktree: Path) -> str:
    """A checkpoint of ``worktree`` by the backend that captures it."""
    backend = backend_for(worktree, timeout_s=60)
    (worktree / "f.txt").write_text(f"content of {worktree.name}\n")
    stamps = [Stamp(key=KEY, source="manual", request_ids=("r1",), seq=1)]
    return backend.snapshot(worktree, stamps if backend.stamps_commits else ()).commit_id


def _holds(repo: pygit2.Repository, commit_id: str, text: str) -> None:
    tree = repo[commit_id].peel(pygit2.Commit).tree
    assert tree["f.txt"].data.decode() == text  # type: ignore[union-attr]


def _same(a: str | Path, b: str | Path) -> bool:
    return Path(a).resolve() == Path(b).resolve()


def test_jj_colocated_is_the_dot_git_beside_jj(tmp_path: Path) -> None:
    root = make_jj_repo(tmp_path / "co")
    commit = _checkpoint(root)
    repo = JjBackend.checkpoint_repository(root)
    assert _same(repo.path, root / ".git")
    _holds(repo, commit, "content of co\n")
    assert backend_type(backend_name(root)) is JjBackend


def test_jj_not_colocated_is_the_bare_store_inside_jj(tmp_path: Path) -> None:
    root = make_jj_repo(tmp_path / "plain", colocate=False)
    commit = _checkpoint(root)
    repo = JjBackend.checkpoint_repository(root)
    assert _same(repo.path, root / ".jj" / "repo" / "store" / "git")
    assert repo.is_bare
    _holds(repo, commit, "content of plain\n")


def test_a_second_jj_workspace_uses_the_first_ones_store(tmp_path: Path) -> None:
    first = make_jj_repo(tmp_path / "first")
    second = tmp_path / "second"
    jj(first, "workspace", "add", "--no-colocate", "--name", "second", str(second))
    commit = _checkpoint(second)
    repo = JjBackend.checkpoint_repository(second)
    assert _same(repo.path, first / ".git")
    _holds(repo, commit, "content of second\n")


def test_plain_git_is_its_private_store_opened_afresh(tmp_path: Path) -> None:
    root = make_git_repo(tmp_path / "g")
    commit = _checkpoint(root)
    repo = GitBackend.checkpoint_repository(root)
    assert _same(repo.path, root / ".git" / "durability" / "checkpoints.git")
    assert repo.workdir is not None and _same(repo.workdir, root)
    _holds(repo, commit, "content of g\n")
    # The user's own repository holds none of it (decision 0049).
    assert git(root, "cat-file", "-e", commit, check=False).returncode != 0
    # Not the object a capture keeps open with its private index: a caller
    # may set the working folder or ignore rules of what it is given.
    assert repo is not worktree_index(root).repo
    assert backend_type(backend_name(root)) is GitBackend


def test_a_linked_git_worktree_shares_the_main_ones_private_store(tmp_path: Path) -> None:
    main = make_git_repo(tmp_path / "main")
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", str(linked), "-b", "side")
    commit = _checkpoint(linked)
    repo = GitBackend.checkpoint_repository(linked)
    assert _same(repo.path, main / ".git" / "durability" / "checkpoints.git")
    assert repo.workdir is not None and _same(repo.workdir, linked)
    _holds(repo, commit, "content of linked\n")
    # The main worktree's store reads the same objects: one store.
    _holds(GitBackend.checkpoint_repository(main), commit, "content of linked\n")


def test_a_missing_worktree_or_store_fails_with_its_code(tmp_path: Path) -> None:
    with pytest.raises(WorktreeMissing):
        GitBackend.checkpoint_repository(tmp_path / "gone")
    with pytest.raises(JjFailed):
        JjBackend.checkpoint_repository(tmp_path)  # no .jj here: no store behind jj
    with pytest.raises(ValueError, match="no backend called 'hg'"):
        backend_type("hg")
