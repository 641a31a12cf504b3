"""A folder swapped for a symlink while a capture reads the tree
(docs/RELIABILITY.md, "Writers during a capture").

The swap is made deterministic with the fanotify racer
(``tests/durability/racer.py``): it strikes when the capture opens
``w5/f03.txt`` (a changed file read before ``w5/f04``, in path order), and
renames ``w5/f04`` away and puts a symlink there, to ``f00`` beside it or
to a folder outside the worktree.  The capture has listed ``w5`` (``f04``
was a folder then) and has not yet read what is inside.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pygit2
import pytest

from durability.backends import MOVING, Stamp
from durability.backends.git import GitBackend, forget
from durability.backends.jj import JjBackend, find_jj, git_dir
from durability.ground.errors import DurabilityError
from durability.store import AttemptKey
from tests.durability.racer import racing
from tests.helpers import checkpoints, git, git_add_all_tree, jj_path, make_git_repo, make_jj_repo

KEY = AttemptKey("run-swap", "node", 0, 1)
SECRET = b"outside the worktree: never in a checkpoint\n"


def _stamp() -> Stamp:
    return Stamp(key=KEY, source="manual", request_ids=(f"req-{uuid.uuid4()}",))


def _files(repo: pygit2.Repository, commit_id: str) -> dict[str, bytes]:
    """Every blob of a commit's tree by path (a stack, not recursion)."""
    found: dict[str, bytes] = {}
    stack = [("", repo[commit_id].peel(pygit2.Commit).tree)]
    while stack:
        prefix, tree = stack.pop()
        for entry in tree:
            path = prefix + str(entry.name)
            obj = repo[entry.id]
            if isinstance(obj, pygit2.Tree):
                stack.append((path + "/", obj))
            elif isinstance(obj, pygit2.Blob):
                found[path] = bytes(obj.read_raw())
    return found


def _layout(root: Path) -> None:
    for name in ("f00", "f04"):
        (root / "w5" / name).mkdir(parents=True)
        (root / "w5" / name / "inner").write_bytes(f"{name}/inner v1\n".encode())
    (root / "w5" / "f03.txt").write_text("three v1\n")


def _change(root: Path) -> None:
    (root / "w5" / "f03.txt").write_text("three v2\n")
    (root / "w5" / "f04" / "inner").write_bytes(b"f04/inner v2\n")


def _swapper(root: Path, target: str) -> tuple[list[int], object]:
    count = [0]

    def strike(path: Path) -> bool:
        if path.name != "f03.txt" or count[0]:
            return False
        count[0] += 1
        os.rename(root / "w5" / "f04", root / "w5" / "f04.away")
        os.symlink(target, root / "w5" / "f04")
        return True
    return count, strike


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "inner").write_bytes(SECRET)
    (folder / "secret.txt").write_bytes(SECRET)
    return folder


@pytest.fixture
def grepo(tmp_path: Path) -> Iterator[Path]:
    path = make_git_repo(tmp_path / "grepo").resolve()
    yield path
    forget(path)


@pytest.mark.parametrize("to", ["sibling", "outside"])
def test_git_capture_never_reads_through_a_swapped_folder(grepo: Path, outside: Path,
                                                         tmp_path: Path, to: str) -> None:
    """No entry holds a state its path never had (``w5/f04/inner`` with
    ``f00``'s content), and nothing from outside enters a checkpoint; the
    next capture equals ``git add -A``.  On the old code libgit2 listed and
    read ``w5/f04`` through the link: ``f00/inner v1`` at ``w5/f04/inner``,
    or the outside files in the checkpoint."""
    _layout(grepo)
    git(grepo, "add", "-A")
    git(grepo, "commit", "-q", "-m", "layout")
    backend = GitBackend()
    backend.snapshot(grepo, [_stamp()])
    _change(grepo)
    count, strike = _swapper(grepo, "f00" if to == "sibling" else str(outside))
    with racing(grepo / "w5", strike):
        during = backend.snapshot(grepo, [_stamp()])
    assert count[0] == 1, "the racer never struck"
    repo = checkpoints(grepo)
    files = _files(repo, during.commit_id)
    assert files.get("w5/f04/inner") in (None, b"f04/inner v1\n", b"f04/inner v2\n"), files
    assert SECRET not in files.values()
    assert files["w5/f03.txt"] == b"three v2\n"
    # Left for the next capture, which takes the tree as it is now.
    assert any(s.reason == MOVING for s in during.skipped)
    after = backend.snapshot(grepo, [_stamp()])
    assert str(repo[after.commit_id].peel(pygit2.Commit).tree_id) == \
        git_add_all_tree(grepo, tmp_path / "ref-index")
    assert SECRET not in _files(repo, after.commit_id).values()
    assert _files(repo, after.commit_id)["w5/f04.away/inner"] == b"f04/inner v2\n"


def test_jj_capture_through_a_swapped_folder_is_a_gap(tmp_path: Path, outside: Path) -> None:
    """jj lists and reads the tree itself, by path.  The racer swaps
    ``w5/f04`` for a link to a folder outside as jj opens its ``.gitignore``
    (jj does so on entering a folder, before listing it), so jj lists and
    hashes the outside folder's files as ``w5/f04/...``.  The capture is a
    ``path-swapped`` error naming the folder (a gap), never a checkpoint;
    the next one takes the link.  On the old code the outside file was in
    the checkpoint (pinned, so replication pushed it)."""
    root = make_jj_repo(tmp_path / "jrepo").resolve()
    _layout(root)
    (root / "w5" / "f04" / ".gitignore").write_text("*.o\n")
    backend = JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)
    backend.snapshot(root)
    _change(root)
    count = [0]

    def strike(path: Path) -> bool:
        if path.name != ".gitignore" or count[0]:
            return False
        count[0] += 1
        os.rename(root / "w5" / "f04", root / "w5" / "f04.away")
        os.symlink(str(outside), root / "w5" / "f04")
        return True

    with racing(root / "w5" / "f04", strike), pytest.raises(DurabilityError) as caught:
        backend.snapshot(root)
    assert count[0] == 1, "the racer never struck"
    assert caught.value.code == "path-swapped"
    assert "w5/f04" in str(caught.value) and "\n" not in str(caught.value)
    after = backend.snapshot(root)
    repo = pygit2.Repository(str(git_dir(root)))
    files = _files(repo, after.commit_id)
    assert SECRET not in files.values()
    assert files["w5/f04.away/inner"] == b"f04/inner v2\n"
    pinned = [r for r in repo.references if r.startswith("refs/durability/jj/")]
    assert all(SECRET not in _files(repo, r.rpartition("/")[2]).values() for r in pinned)
