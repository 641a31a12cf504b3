"""Writers during a capture: a file that changes while a backend reads it
never fails the capture (docs/RELIABILITY.md, "Writers during a capture").

The races are made deterministic with a fanotify racer (``tests/durability/
racer.py``) that changes a file each time the backend opens it, after the
backend listed and stat'ed it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import MOVING, Skipped, Stamp
from durability.backends.git import GitBackend, forget, worktree_index
from durability.backends.jj import JjBackend, find_jj
from durability.backends.moving import MAX_RETRIES_PER_CAPTURE, MAX_TRIES
from durability.store import AttemptKey
from tests.durability.racer import racing
from tests.helpers import checkpoints, git, git_add_all_tree, jj_path, make_git_repo, make_jj_repo

KEY = AttemptKey("run-w", "node", 0, 1)
BIG = b"x" * 300_000


def _stamp() -> Stamp:
    return Stamp(key=KEY, source="manual", request_ids=(f"req-{uuid.uuid4()}",))


def _blob(worktree: Path, commit_id: str, path: str) -> bytes | None:
    repo = checkpoints(worktree)
    tree = repo[commit_id].peel(pygit2.Commit).tree
    try:
        return bytes(repo[tree[path].id].read_raw())
    except KeyError:
        return None


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    yield path
    forget(path)


def _truncating(name: str, times: int) -> tuple[list[int], Callable[[Path], bool]]:
    """A strike that halves ``name`` at each of its first ``times`` opens."""
    count = [0]

    def strike(path: Path) -> bool:
        if path.name != name or count[0] >= times:
            return False
        count[0] += 1
        os.truncate(path, os.lstat(path).st_size // 2)
        return True
    return count, strike


def test_git_file_truncated_while_read_is_read_again(grepo: Path) -> None:
    """Shrunk under libgit2's read once: the second read is consistent and
    the checkpoint holds what is on disk at the end.  On the old code this
    was GitFailed('failed to read file into stream')."""
    (grepo / "big.txt").write_bytes(BIG)
    count, strike = _truncating("big.txt", 1)
    with racing(grepo, strike) as struck:
        snap = GitBackend().snapshot(grepo, [_stamp()])
    assert [p.name for p in struck] == ["big.txt"] and count[0] == 1
    assert _blob(grepo, snap.commit_id, "big.txt") == BIG[: len(BIG) // 2]
    assert snap.skipped == ()
    assert worktree_index(grepo).moving == set()


def test_git_file_that_keeps_changing_keeps_its_last_consistent_content(grepo: Path) -> None:
    """Shrunk at every read: after MAX_TRIES reads the capture keeps the
    previous checkpoint's content (no gap), and the next capture takes it."""
    (grepo / "big.txt").write_bytes(BIG)
    (grepo / "other.txt").write_text("one\n")
    first = GitBackend().snapshot(grepo, [_stamp()])
    (grepo / "big.txt").write_bytes(BIG + b"more")
    (grepo / "other.txt").write_text("two\n")
    count, strike = _truncating("big.txt", MAX_TRIES)
    with racing(grepo, strike):
        moving = GitBackend().snapshot(grepo, [_stamp()])
    assert count[0] == MAX_TRIES
    assert _blob(grepo, moving.commit_id, "big.txt") == _blob(grepo, first.commit_id, "big.txt")
    assert _blob(grepo, moving.commit_id, "other.txt") == b"two\n"
    # No gap, but marked: its content now is in no checkpoint (a restore
    # must not write over it).
    assert moving.skipped == (Skipped("big.txt", MOVING),)
    assert worktree_index(grepo).moving == {"big.txt"}
    # The next capture, informed of no change at all, still rereads it.
    settled = GitBackend().snapshot(grepo, [_stamp()], changed_paths=[])
    assert _blob(grepo, settled.commit_id, "big.txt") == BIG[: (len(BIG) + 4) >> MAX_TRIES]
    assert worktree_index(grepo).moving == set()


def test_git_new_file_that_keeps_changing_is_left_for_the_next_capture(grepo: Path) -> None:
    (grepo / "new.bin").write_bytes(BIG)
    count, strike = _truncating("new.bin", MAX_TRIES)
    with racing(grepo, strike):
        snap = GitBackend().snapshot(grepo, [_stamp()])
    assert count[0] == MAX_TRIES
    assert _blob(grepo, snap.commit_id, "new.bin") is None
    final = GitBackend().snapshot(grepo, [_stamp()])
    assert (str(checkpoints(grepo)[final.commit_id].peel(pygit2.Commit).tree_id)
            == git_add_all_tree(grepo, grepo.parent / "ref-index"))


def test_git_retries_of_one_capture_are_bounded(grepo: Path) -> None:
    """Twelve files shrinking at every read: each gets one read, and the
    capture spends at most MAX_RETRIES_PER_CAPTURE retries on them all (not
    12 x MAX_TRIES), then leaves them for the next capture."""
    names = [f"busy{i:02}.bin" for i in range(12)]
    for name in names:
        (grepo / name).write_bytes(BIG)

    def strike(path: Path) -> bool:
        if path.name not in names:
            return False
        os.truncate(path, os.lstat(path).st_size // 2)
        return True

    with racing(grepo, strike) as struck:
        snap = GitBackend().snapshot(grepo, [_stamp()])
    assert len(struck) == len(names) + MAX_RETRIES_PER_CAPTURE
    assert worktree_index(grepo).moving == set(names)
    assert all(_blob(grepo, snap.commit_id, n) is None for n in names)
    final = GitBackend().snapshot(grepo, [_stamp()])
    assert all(_blob(grepo, final.commit_id, n) is not None for n in names)


@pytest.mark.parametrize("becomes", ["gone", "folder", "symlink"])
def test_git_file_replaced_while_read(grepo: Path, becomes: str) -> None:
    """Deleted, or replaced by a folder or a symlink, as libgit2 opens it:
    the capture succeeds, the stale read is not kept, and the next capture
    equals ``git add -A``."""
    git(grepo, "commit", "-q", "--allow-empty", "-m", "base")
    (grepo / "f.txt").write_bytes(BIG)

    def strike(path: Path) -> bool:
        if path.name != "f.txt" or not path.is_file() or path.is_symlink():
            return False
        path.unlink()
        if becomes == "folder":
            path.mkdir()
            (path / "inner").write_text("in\n")
        elif becomes == "symlink":
            path.symlink_to("elsewhere")
        return True

    with racing(grepo, strike) as struck:
        snap = GitBackend().snapshot(grepo, [_stamp()])
    assert struck, "the racer never struck"
    assert _blob(grepo, snap.commit_id, "f.txt") in (None, b"elsewhere")
    final = GitBackend().snapshot(grepo, [_stamp()])
    assert (str(checkpoints(grepo)[final.commit_id].peel(pygit2.Commit).tree_id)
            == git_add_all_tree(grepo, grepo.parent / "ref-index"))


def _jj_backend() -> JjBackend:
    return JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)


@pytest.fixture
def jrepo(tmp_path: Path) -> Path:
    """A jj repo whose folder ``d`` (with a ``.gitignore``: jj opens it as it
    enters ``d``, after listing the root) is in jj's last snapshot."""
    path = make_jj_repo(tmp_path / "jrepo").resolve()
    (path / "d").mkdir()
    (path / "d" / ".gitignore").write_text("*.o\n")
    (path / "d" / "x.txt").write_text("x\n")
    _jj_backend().snapshot(path)
    return path


def test_jj_folder_replaced_while_snapshotted_is_retried(jrepo: Path) -> None:
    """``d`` becomes a file after jj listed it: jj 0.46 fails its snapshot
    ("Failed to read directory ... Not a directory (os error 20)"); the
    capture runs jj again and records the file.  On the old code this was
    JjFailed."""
    folder = jrepo / "d"

    def strike(path: Path) -> bool:
        if path.name != ".gitignore" or not folder.is_dir():
            return False
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()
        folder.write_text("now a file\n")
        return True

    with racing(folder, strike) as struck:
        snap = _jj_backend().snapshot(jrepo)
    assert len(struck) == 1
    assert _blob(jrepo, snap.commit_id, "d") == b"now a file\n"
    assert snap.skipped == ()


def test_jj_tree_that_keeps_moving_answers_with_the_last_snapshot(jrepo: Path) -> None:
    """``d`` is renamed under every jj run: after MAX_TRIES failed snapshots
    the capture answers with jj's last snapshot (a state the tree had), and
    the next capture, once the writer stops, takes the rest."""
    before = _jj_backend().snapshot(jrepo)
    (jrepo / "new.txt").write_text("new\n")
    names = [jrepo / "d", jrepo / "d2"]

    def strike(path: Path) -> bool:
        if path.name != ".gitignore":
            return False
        here = next(p for p in names if p.is_dir())
        here.rename(names[1 - names.index(here)])
        return True

    with racing(jrepo / "d", strike) as struck:
        moving = _jj_backend().snapshot(jrepo)
    assert len(struck) == MAX_TRIES
    assert moving.commit_id == before.commit_id
    assert Skipped("", MOVING) in moving.skipped  # the whole tree is unsettled
    settled = _jj_backend().snapshot(jrepo)
    assert all(s.reason != MOVING for s in settled.skipped)
    assert _blob(jrepo, settled.commit_id, "new.txt") == b"new\n"
