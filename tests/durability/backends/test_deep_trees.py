"""Trees as deep as the file system allows, on both backends
(docs/RELIABILITY.md, "Deep trees").

Folders are one letter (``d``) so that a 2,000-deep path (4,000 bytes) stays
under PATH_MAX (4,096) for the tools that resolve path strings (plain git,
jj); the trees are built and read through directory descriptors, as the
backends' own reads and writes are.  A forged 3,000-deep tree (6,000 bytes)
is past PATH_MAX: only descriptors reach it.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget, worktree_index
from durability.backends.jj import JjBackend, find_jj, git_dir
from durability.ground.errors import DurabilityError
from durability.store import AttemptKey
from tests.helpers import checkpoints, git_add_all_tree, jj_path, make_git_repo, make_jj_repo

KEY = AttemptKey("run-deep", "node", 0, 1)


def _stamp() -> Stamp:
    return Stamp(key=KEY, source="manual", request_ids=(f"req-{uuid.uuid4()}",))


def _deepest(root: Path, depth: int, *, create: bool = False) -> int:
    """A descriptor of ``root``/d/d/.../d (``depth`` folders), walked by fd."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        if create:
            try:
                os.mkdir("d", dir_fd=fd)
            except FileExistsError:
                pass
        try:
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def _write(root: Path, depth: int, name: str, data: bytes) -> None:
    fd = _deepest(root, depth, create=True)
    try:
        f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=fd)
        os.write(f, data)
        os.close(f)
    finally:
        os.close(fd)


def _read(root: Path, depth: int, name: str) -> bytes:
    fd = _deepest(root, depth)
    try:
        f = os.open(name, os.O_RDONLY, dir_fd=fd)
        try:
            return os.read(f, 1 << 16)
        finally:
            os.close(f)
    finally:
        os.close(fd)


def _blob_at(repo: pygit2.Repository, commit_id: str, path: str) -> bytes | None:
    try:
        entry = repo[commit_id].peel(pygit2.Commit).tree[path]
    except KeyError:
        return None
    return bytes(repo[entry.id].read_raw())


@pytest.fixture
def place(tmp_path: Path) -> Iterator[Path]:
    """A folder for one deep worktree, removed with ``rm -rf`` afterwards
    (Python's recursive ``shutil.rmtree`` stops near 1,000 levels)."""
    path = tmp_path / "w"
    yield path
    forget(path.resolve())
    subprocess.run(["rm", "-rf", "--", str(path)], check=False, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [100, 2000])
def test_git_deep_tree_is_captured_and_restored(place: Path, tmp_path: Path,
                                                depth: int) -> None:
    """The capture equals plain ``git add -A`` (ignore rules included, deep
    ones read by our own rules past libgit2's depth), and a restore puts the
    deep file back.  On the old code every capture failed: "directory
    nesting too deep (100)"."""
    root = make_git_repo(place).resolve()
    (root / ".gitignore").write_text("*.o\n")
    _write(root, depth, "f", b"one\n")
    _write(root, depth, "skip.o", b"ignored\n")
    _write(root, depth // 2, ".gitignore", b"local.tmp\n!keep.o\n")
    _write(root, depth - 1, "local.tmp", b"ignored too\n")
    _write(root, depth - 1, "keep.o", b"re-included\n")
    backend = GitBackend()
    first = backend.snapshot(root, [_stamp()])
    repo = checkpoints(root)
    assert str(_tree(repo, first.commit_id)) == git_add_all_tree(root, tmp_path / "ref-index")
    deep = "d/" * depth
    assert _blob_at(repo, first.commit_id, deep + "f") == b"one\n"
    assert _blob_at(repo, first.commit_id, deep + "skip.o") is None
    assert _blob_at(repo, first.commit_id, "d/" * (depth - 1) + "keep.o") == b"re-included\n"
    _write(root, depth, "f", b"two\n")
    second = backend.snapshot(root, [_stamp()])
    assert _blob_at(repo, second.commit_id, deep + "f") == b"two\n"
    _round_trip(backend, root, depth, first.commit_id, second.commit_id, repo,
                ignored=("skip.o", b"ignored\n"))


def test_git_informed_capture_of_a_deep_path(place: Path, tmp_path: Path) -> None:
    """A watcher-informed capture of a path 1,200 folders down is git's
    tree.  The tree written from the restaged paths (decision 0060), by
    recursion, died with a RecursionError past about 1,000 folders."""
    depth = 1200
    root = make_git_repo(place).resolve()
    _write(root, depth, "f", b"one\n")
    backend = GitBackend()
    backend.snapshot(root, [_stamp()])
    _write(root, depth, "f", b"two\n")
    _write(root, depth - 1, "g", b"new\n")
    deep = "d/" * depth
    snap = backend.snapshot(root, [_stamp()], changed_paths={deep + "f", "d/" * (depth - 1) + "g"})
    repo = checkpoints(root)
    assert worktree_index(root).last_scan == "paths"
    assert _blob_at(repo, snap.commit_id, deep + "f") == b"two\n"
    assert str(_tree(repo, snap.commit_id)) == git_add_all_tree(root, tmp_path / "ref-index")


def _tree(repo: pygit2.Repository, commit_id: str) -> pygit2.Oid:
    return repo[commit_id].peel(pygit2.Commit).tree_id


def _round_trip(backend: GitBackend | JjBackend, root: Path, depth: int, first: str,
                second: str, repo: pygit2.Repository,
                ignored: tuple[str, bytes] | None = None) -> None:
    """Back to ``first`` (an overwrite deep down), then to an empty tree (the
    deep folders deleted) and to ``first`` again (made from nothing)."""
    stamps = [_stamp()] if isinstance(backend, GitBackend) else []
    backend.restore(root, first, pre_restore=second)
    assert _read(root, depth, "f") == b"one\n"
    if ignored is not None:  # an ignored file is never touched
        assert _read(root, depth, ignored[0]) == ignored[1]
    assert _tree(repo, backend.snapshot(root, stamps).commit_id) == _tree(repo, first)
    sig = pygit2.Signature("t", "t@example.invalid", 0, 0)
    empty = str(repo.create_commit(None, sig, sig, "empty\n", repo.TreeBuilder().write(), []))
    backend.restore(root, empty, pre_restore=backend.snapshot(root, stamps).commit_id)
    assert _blob_at(repo, backend.snapshot(root, stamps).commit_id, "d/" * depth + "f") is None
    backend.restore(root, first, pre_restore=backend.snapshot(root, stamps).commit_id)
    assert _read(root, depth, "f") == b"one\n"
    assert _tree(repo, backend.snapshot(root, stamps).commit_id) == _tree(repo, first)


def _jj() -> JjBackend:
    return JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [100, 2000])
def test_jj_deep_tree_is_captured_and_restored(place: Path, depth: int) -> None:
    """jj captures the deep tree itself; the restore's confined writer puts
    it back.  On the old code the restore of a tree deeper than about 1,000
    folders died with a RecursionError in the writer."""
    root = make_jj_repo(place).resolve()
    _write(root, depth, "f", b"one\n")
    backend = _jj()
    first = backend.snapshot(root)
    repo = pygit2.Repository(str(git_dir(root)))
    assert _blob_at(repo, first.commit_id, "d/" * depth + "f") == b"one\n"
    _write(root, depth, "f", b"two\n")
    second = backend.snapshot(root)
    _round_trip(backend, root, depth, first.commit_id, second.commit_id, repo)


def _forge(repo: pygit2.Repository, depth: int) -> str:
    """A commit whose tree holds one file under ``depth`` folders, built from
    tree objects directly (no worktree could be captured that deep)."""
    builder = repo.TreeBuilder()
    builder.insert("f", repo.create_blob(b"forged\n"), pygit2.enums.FileMode.BLOB)
    tree = builder.write()
    for _ in range(depth):
        builder = repo.TreeBuilder()
        builder.insert("d", tree, pygit2.enums.FileMode.TREE)
        tree = builder.write()
    sig = pygit2.Signature("forger", "forger@example.invalid", 0, 0)
    commit = repo.create_commit(None, sig, sig, "forged\n", tree, [])
    repo.references.create("refs/heads/forged", commit)
    return str(commit)


@pytest.mark.slow
def test_git_forged_3000_deep_tree_is_restored(place: Path) -> None:
    """Past PATH_MAX: the confined writer reaches it by descriptors, and the
    capture after it (also by descriptors) holds exactly that tree."""
    root = make_git_repo(place).resolve()
    backend = GitBackend()
    before = backend.snapshot(root, [_stamp()])
    repo = checkpoints(root)
    forged = _forge(repo, 3000)
    backend.restore(root, forged, pre_restore=before.commit_id)
    assert _read(root, 3000, "f") == b"forged\n"
    after = backend.snapshot(root, [_stamp()])
    assert repo[after.commit_id].peel(pygit2.Commit).tree_id == \
        repo[forged].peel(pygit2.Commit).tree_id


@pytest.mark.slow
def test_jj_forged_3000_deep_tree_is_refused_before_writing(place: Path) -> None:
    """jj resolves path strings, so it could not snapshot a path past
    PATH_MAX: every later capture would fail.  The restore refuses it
    before writing anything, in one line with a stable code naming the
    path; on the old code it died with a RecursionError traceback."""
    root = make_jj_repo(place).resolve()
    backend = _jj()
    before = backend.snapshot(root)
    forged = _forge(pygit2.Repository(str(git_dir(root))), 3000)
    with pytest.raises(DurabilityError) as caught:
        backend.restore(root, forged, pre_restore=before.commit_id)
    assert caught.value.code == "path-too-long"
    message = str(caught.value)
    assert "\n" not in message and "d/d/d/" in message and len(message) < 400
    assert not (root / "d").exists()
    assert backend.snapshot(root).commit_id == before.commit_id
