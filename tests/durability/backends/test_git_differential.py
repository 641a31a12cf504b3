"""Differential test of the git backend against git itself and against jj.

Random sequences of file operations (create, edit, delete, rename of files
and folders, chmod +x/-x, symlinks, binary, empty and non-ASCII files,
ignored files) run on a plain git worktree.  After every step the tree of the
git backend's checkpoint must equal

* the tree ``git add -A && git write-tree`` writes for a copy of the
  worktree, with a private index kept from step to step (the same
  "tracked stays tracked" history as the backend's own index), and
* the tree of a jj-backend checkpoint of the same content in a colocated
  jj copy (jj is required: the test fails loudly without it).

Both full scans and watcher-informed captures (only the touched paths
named) are checked.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget, worktree_index
from durability.backends.jj import JjBackend, find_jj
from durability.store import AttemptKey
from tests.helpers import jj_path, make_git_repo, make_jj_repo

FOLDERS = ["", "a", "a/b", "c", "ü-dir"]
NAMES = ["x.txt", "y.py", "z", "data.bin", "ñandú.md", "日本.txt", "space name.txt"]
IGNORE = "*.log\nbuild/\n!keep.log\n"
STEPS = 20


class World:
    """The worktree under test and a random source of operations on it."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root = root
        self.rng = rng
        self.counter = 0
        self.used: set[str] = set()

    # -- what is there --------------------------------------------------------------

    def files(self) -> list[str]:
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            rel = os.path.relpath(dirpath, self.root)
            for name in sorted(filenames) + [d for d in dirnames
                                             if os.path.islink(os.path.join(dirpath, d))]:
                path = name if rel == "." else f"{rel}/{name}"
                if path != ".gitignore":
                    found.append(path)
        return found

    def folders(self) -> list[str]:
        return sorted({p.rsplit("/", 1)[0] for p in self.files() if "/" in p})

    def fresh_path(self, suffix: str = "") -> str:
        self.counter += 1
        folder = self.rng.choice(FOLDERS)
        name = f"{self.counter}-{self.rng.choice(NAMES)}{suffix}"
        return f"{folder}/{name}" if folder else name

    def _write(self, path: str, data: bytes) -> set[str]:
        full = self.root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        if full.is_symlink():
            full.unlink()
        full.write_bytes(data)
        return {path}

    # -- operations: each returns the paths it touched -----------------------------------

    def create(self) -> set[str]:
        return self._write(self.fresh_path(), f"line {self.rng.random()}\n".encode())

    def edit(self) -> set[str]:
        regular = [p for p in self.files() if not (self.root / p).is_symlink()]
        if not regular:
            return self.create()
        path = self.rng.choice(regular)
        with open(self.root / path, "ab") as f:
            f.write(b"more\n")
        return {path}

    def delete(self) -> set[str]:
        files = self.files()
        if not files:
            return self.create()
        path = self.rng.choice(files)
        (self.root / path).unlink()
        return {path}

    def rename(self) -> set[str]:
        files = self.files()
        if not files:
            return self.create()
        src = self.rng.choice(files)
        dst = self.fresh_path()
        (self.root / dst).parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.root / src, self.root / dst)
        return {src, dst}

    def rename_folder(self) -> set[str]:
        folders = [f for f in self.folders() if not (self.root / f).is_symlink()]
        if not folders:
            return self.create()
        src = self.rng.choice(folders)
        self.counter += 1
        dst = f"moved-{self.counter}"
        os.rename(self.root / src, self.root / dst)
        return {src, dst}

    def chmod(self) -> set[str]:
        regular = [p for p in self.files() if not (self.root / p).is_symlink()]
        if not regular:
            return self.create()
        path = self.rng.choice(regular)
        mode = os.stat(self.root / path).st_mode
        os.chmod(self.root / path, mode ^ 0o111 if mode & 0o100 else mode | 0o111)
        return {path}

    def symlink(self) -> set[str]:
        path = self.fresh_path()
        full = self.root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        files = self.files()
        target = os.path.relpath(self.root / self.rng.choice(files), full.parent) \
            if files and self.rng.random() < 0.7 else "dangling-target"
        full.symlink_to(target)
        return {path}

    def binary(self) -> set[str]:
        data = bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 3000)))
        return self._write(self.fresh_path(".bin"), b"\0" + data)

    def empty(self) -> set[str]:
        return self._write(self.fresh_path(), b"")

    def non_ascii(self) -> set[str]:
        self.counter += 1
        return self._write(f"ü-dir/Ωmega-{self.counter}-ß.txt", "ünïcödé\n".encode())

    def ignored(self) -> set[str]:
        self.counter += 1
        choices = [f"{self.counter}.log", f"build/{self.counter}.txt",
                   f"a/build/{self.counter}.o", f"c/{self.counter}.log", "keep.log"]
        return self._write(self.rng.choice(choices), b"ignored unless negated\n")

    def ops(self) -> dict[str, Callable[[], set[str]]]:
        return {"create": self.create, "edit": self.edit, "delete": self.delete,
                "rename": self.rename, "rename_folder": self.rename_folder,
                "chmod": self.chmod, "symlink": self.symlink, "binary": self.binary,
                "empty": self.empty, "non_ascii": self.non_ascii, "ignored": self.ignored}

    def plan(self, steps: int) -> Iterator[list[str]]:
        """Every kind of operation early on (shuffled), then random ones."""
        kinds = list(self.ops())
        first = kinds[:]
        self.rng.shuffle(first)
        for _ in range(steps):
            batch = [first.pop() for _ in range(min(2, len(first)))] or \
                [self.rng.choice(kinds) for _ in range(self.rng.randrange(1, 4))]
            self.used.update(batch)
            yield batch


def git_reference(worktree: Path, copy: Path, index_file: Path) -> str:
    """``git add -A && git write-tree`` on a fresh copy of the worktree's files."""
    _mirror(worktree, copy)
    env = {**os.environ, "GIT_INDEX_FILE": str(index_file),
           "GIT_DIR": str(worktree / ".git"), "GIT_WORK_TREE": str(copy)}
    for args in (["add", "-A"], ["write-tree"]):
        done = subprocess.run(["git", *args], env=env, cwd=copy, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _mirror(source: Path, dest: Path, keep: tuple[str, ...] = ()) -> None:
    """Make ``dest`` hold exactly ``source``'s files (``.git`` and ``keep`` aside)."""
    dest.mkdir(exist_ok=True)
    for entry in dest.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    for entry in source.iterdir():
        if entry.name == ".git":
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, dest / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, dest / entry.name, follow_symlinks=False)


@pytest.mark.parametrize("informed", [False, True], ids=["full-scan", "watcher-informed"])
@pytest.mark.parametrize("seed", [1, 2])
def test_checkpoint_tree_equals_git_and_jj(tmp_path: Path, seed: int, informed: bool) -> None:
    jj = JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)
    worktree = make_git_repo(tmp_path / "wt").resolve()
    (worktree / ".gitignore").write_text(IGNORE)
    jj_copy = make_jj_repo(tmp_path / "jj-copy").resolve()
    git_copy = tmp_path / "git-copy"
    ref_index = tmp_path / "ref-index"
    world = World(worktree, random.Random(seed))
    backend = GitBackend()
    key = AttemptKey(f"diff-{seed}", "node", 0, 1)
    state = worktree_index(worktree)
    scans = []
    try:
        for step, batch in enumerate(world.plan(STEPS)):
            touched: set[str] = set()
            for kind in batch:
                touched |= world.ops()[kind]()
            stamp = Stamp(key=key, source="watch", request_ids=(str(uuid.uuid4()),), seq=step)
            snap = backend.snapshot(worktree, [stamp],
                                    changed_paths=touched if informed and step else None)
            scans.append(state.last_scan)
            ours = backend.tree_id(worktree, snap.commit_id)
            assert ours == git_reference(worktree, git_copy, ref_index), (step, batch)
            _mirror(worktree, jj_copy, keep=(".jj", ".git"))
            jj_snap = jj.snapshot(jj_copy)
            assert ours == jj.tree_id(jj_copy, jj_snap.commit_id), (step, batch, "jj")
    finally:
        forget(worktree)
    assert world.used == set(world.ops())
    assert set(scans[1:]) == ({"paths"} if informed else {"full"})
    # Informed steps write their tree from the restaged paths alone (every
    # one checked against write_tree by the suite's CHECK_TREES), save where
    # a file and a folder swapped places.
    assert state.trees_of_paths > (STEPS // 2 if informed else -1)
    assert informed or state.trees_of_paths == 0
