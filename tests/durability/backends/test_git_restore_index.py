"""A git restore stages the files it writes from the blobs it wrote, with the
stat data of each file written (as ``git checkout`` does), so the scan that
verifies it need not read them all back.  These tests check that such trusted
entries never hide a later change."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends.git import forget
from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.restore.apply import restore
from durability.store import AttemptKey
from tests.helpers import checkpoints, make_git_repo

KEY = AttemptKey("run-r", "node", 0, 1)


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    yield path
    forget(path)


def snap(settings: Settings, repo: Path) -> str:
    done = snapshot_now(settings, key=KEY, path=repo, request_id=str(uuid.uuid4()))
    assert done.ok and done.commit_id is not None, done
    return done.commit_id


def blob(repo: Path, commit_id: str, path: str) -> bytes:
    tree = checkpoints(repo)[commit_id].peel(pygit2.Commit).tree
    return tree[path].peel(pygit2.Blob).data


@pytest.mark.parametrize("same_size", [True, False])
def test_a_file_changed_right_after_the_restore_is_captured(settings: Settings, grepo: Path,
                                                            same_size: bool) -> None:
    """A restored file overwritten at once (same size too, within the same
    clock tick as the restore wrote it) is captured with its new content: the
    trusted entry never stands for it."""
    (grepo / "a.txt").write_text("old1\n")
    (grepo / "b.txt").write_text("keep\n")
    snap(settings, grepo)
    (grepo / "a.txt").write_text("new2\n")
    snap(settings, grepo)
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=1)
    changed = b"zzz9\n" if same_size else b"a different length\n"
    (grepo / "a.txt").write_bytes(changed)
    after = snap(settings, grepo)
    assert blob(grepo, after, "a.txt") == changed
    assert blob(grepo, after, "b.txt") == b"keep\n"


def test_a_restored_ignored_symlink_stays_tracked_whatever_its_name(
        settings: Settings, grepo: Path) -> None:
    """A checkpoint holds a symlink the rules ignore (``git add -f``); a
    restore writes it back and the tree after holds it, as ``git checkout``
    would, also when its name is not UTF-8 (libgit2's binding cannot say
    whether such a name is ignored; the scan's own rules can)."""
    from tests.helpers import git

    (grepo / ".gitignore").write_text("*.lnk\n")
    top = os.fsencode(grepo)
    names = [b"plain.lnk", b"n\xff.lnk"]
    for name in names:
        os.symlink("README.md", top + b"/" + name)
    git(grepo, "add", "-f", ".gitignore", *map(os.fsdecode, names))
    git(grepo, "commit", "-q", "-m", "forced links")
    first = snap(settings, grepo)
    for name in names:
        os.unlink(top + b"/" + name)
    snap(settings, grepo)
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=1)
    after = snap(settings, grepo)
    for commit_id in (first, after):
        tree = checkpoints(grepo)[commit_id].peel(pygit2.Commit).tree
        held = {os.fsencode(e.name) for e in tree}
        assert set(names) <= held, (commit_id == first, sorted(held))
