"""git's object gc without a grace prunes up to the second gc took the
worktree locks in, not up to "now".  git runs in a session of its own, so a
``durability gc`` killed during ``git repack``/``git prune`` leaves them
running after its locks are gone; with "now" they pruned the objects the
captures that then went ahead were writing ("invalid object specified" on
the next capture, seen killing gc at random: test_gc_kill9.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pygit2

from durability.backends.history import collect_git
from tests.helpers import make_git_repo


def _loose(repo: pygit2.Repository, data: bytes, mtime: float | None = None) -> str:
    oid = str(repo.create_blob(data))
    if mtime is not None:
        os.utime(Path(repo.path) / "objects" / oid[:2] / oid[2:], (mtime, mtime))
    return oid


def test_no_grace_prunes_only_what_is_older_than_the_locks(tmp_path: Path) -> None:
    repo = pygit2.Repository(str(make_git_repo(tmp_path / "wt")))
    locked_at = time.time() - 30
    old = _loose(repo, b"unreachable since long ago\n", mtime=locked_at - 3600)
    fresh = _loose(repo, b"written by a capture after the locks went\n")
    done = collect_git(Path(repo.path), 0, 60, locked_at_s=locked_at)
    assert done.ran
    repo = pygit2.Repository(repo.path)
    assert old not in repo
    assert fresh in repo
