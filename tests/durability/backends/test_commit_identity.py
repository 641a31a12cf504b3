"""Every commit the toolkit writes with pygit2 (a checkpoint, a remote's
manifest) carries the one identity ``git_commit.signature`` gives, whatever
the user's git configuration says."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget
from durability.backends.git_commit import EMAIL, NAME
from durability.remote import manifest
from durability.store import AttemptKey, Checkpoint
from tests.helpers import checkpoints, make_git_repo

KEY = AttemptKey("run-id", "node", 0, 1)


@pytest.fixture
def grepo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    # The user's own identity, which none of the toolkit's commits may take.
    for var in ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME"):
        monkeypatch.setenv(var, "Some User")
    for var in ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"):
        monkeypatch.setenv(var, "user@example.invalid")
    yield path
    forget(path)


def _identities(commit: pygit2.Commit) -> set[tuple[str, str, int]]:
    return {(s.name, s.email, s.offset) for s in (commit.author, commit.committer)}


def test_checkpoints_and_manifests_sign_as_the_toolkit(grepo: Path) -> None:
    (grepo / "a.txt").write_text("a\n")
    snap = GitBackend().snapshot(grepo, [Stamp(key=KEY, source="manual",
                                               request_ids=(f"req-{uuid.uuid4()}",), seq=1)])
    repo = checkpoints(grepo)
    checkpoint = repo[snap.commit_id].peel(pygit2.Commit)
    ref = "refs/durability/manifests/test"
    manifest.add(repo, ref, [manifest.Entry(Checkpoint(
        run_id=KEY.run_id, node_id=KEY.node_id, iteration=KEY.iteration,
        attempt=KEY.attempt, seq=1, commit_id=snap.commit_id, change_id=None, operation_id=None,
        worktree=str(grepo), source="manual", tool_use_id=None, label=None,
        request_id="r", created_at_ms=1), "refs/durability/git/x")])
    listed = repo.references[ref].peel(pygit2.Commit)
    assert _identities(checkpoint) == _identities(listed) == {(NAME, EMAIL, 0)}
