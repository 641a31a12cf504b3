"""What the jj backend's swapped-folder check (``jj.check_swapped``) opens:
the folders of what the snapshot changed since the last snapshot it passed,
not every folder the working-copy commit holds since its parent."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from durability.backends.confined import ConfinedTree
from durability.backends.jj import JjBackend, _changed_folders, find_jj
from tests.helpers import checkpoints, git, jj_path, make_git_repo, make_jj_repo

FOLDERS = 40


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real: Callable[[ConfinedTree, str], int] = ConfinedTree.dir_fd

    def dir_fd(self: ConfinedTree, folder: str) -> int:
        opened.append(folder)
        return real(self, folder)

    monkeypatch.setattr(ConfinedTree, "dir_fd", dir_fd)
    return opened


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = make_jj_repo(tmp_path / "jrepo").resolve()
    for i in range(FOLDERS):
        (path / f"d{i:02}" / "sub").mkdir(parents=True)
        (path / f"d{i:02}" / "sub" / "f.txt").write_text(f"{i}\n")
    return path


def _backend() -> JjBackend:
    return JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)


def test_the_check_opens_only_what_changed_since_the_last_snapshot(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = _backend()
    backend.snapshot(root)  # every folder is new to the working-copy commit
    (root / "d07" / "sub" / "f.txt").write_text("changed\n")
    (root / "new").mkdir()
    (root / "new" / "g.txt").write_text("g\n")
    opened = _spy(monkeypatch)
    backend.snapshot(root)
    assert sorted(set(opened)) == ["d07/sub", "new"]
    opened.clear()
    backend.snapshot(root)  # nothing changed: nothing to open
    assert opened == []


def test_without_a_readable_last_snapshot_the_parent_is_the_baseline(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline naming no commit of the store (forged, another store) is
    not trusted: the check falls back to everything since the parent."""
    backend = _backend()
    backend.snapshot(root)
    (root / ".jj" / "durability").mkdir(exist_ok=True)
    (root / ".jj" / "durability" / "swap-checked").write_text("0" * 40 + "\n")
    (root / "d07" / "sub" / "f.txt").write_text("changed\n")
    opened = _spy(monkeypatch)
    backend.snapshot(root)
    assert {f"d{i:02}/sub" for i in range(FOLDERS)} <= set(opened)


def _commit_tree(root: Path) -> pygit2.Tree:
    git(root, "add", "-A")
    tree = git(root, "write-tree").stdout.strip()
    return checkpoints(root)[tree].peel(pygit2.Tree)


@pytest.mark.parametrize("seed", range(6))
def test_changed_folders_are_those_of_libgit2s_diff(tmp_path: Path, seed: int) -> None:
    """The pruned walk finds the folders of every added or changed entry that
    libgit2's full tree-to-tree diff finds: random edits, folders turned to
    files and back, links, names that are not UTF-8."""
    rng = random.Random(seed)
    root = make_git_repo(tmp_path / "g")
    top = os.fsencode(root)
    names = [b"a", b"b", b"c\xff", b"d"]

    def some_path() -> bytes:
        return b"/".join(rng.choice(names) for _ in range(rng.randint(1, 4)))

    def put(path: bytes, data: bytes) -> None:
        full = top + b"/" + path
        parts = path.split(b"/")
        for n in range(1, len(parts)):
            folder = top + b"/" + b"/".join(parts[:n])
            if os.path.lexists(folder) and not os.path.isdir(folder):
                os.unlink(folder)
            os.makedirs(folder, exist_ok=True)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        elif os.path.lexists(full):
            os.unlink(full)
        if rng.random() < 0.1:
            os.symlink(data, full)
        else:
            with open(full, "wb") as f:
                f.write(data)

    for i in range(40):
        put(some_path(), b"v%d" % i)
    before = _commit_tree(root)
    for i in range(rng.randint(1, 12)):
        put(some_path(), b"w%d" % i)
    after = _commit_tree(root)
    repo = checkpoints(root)
    want = {os.fsdecode(d.new_file.raw_path).rpartition("/")[0]
            for d in before.diff_to_tree(after).deltas
            if d.status != pygit2.enums.DeltaStatus.DELETED}
    assert _changed_folders(repo, before, after) == want
    assert _changed_folders(repo, after, after) == set()
