"""Differential test of the git tree an informed capture writes from the
restaged paths alone (``WorktreeIndex._tree_of_paths``, decision 0060).

Random sequences of steps on a plain git worktree: files created, edited
and deleted at several depths, the last file of nested folders deleted,
chmod, symlinks (to files, folders, nothing), file/folder swaps, folder
renames, names with spaces, non-ASCII and non-UTF-8 bytes, ignored files
(untracked, and tracked: added with ``git add -f`` before the first capture,
or matched by a rule added later), ``.gitignore`` and ``info/exclude``
edits, nested repositories recorded as gitlinks whose HEAD then moves; the
watcher's paths name folders, paths that did not change, paths outside the
worktree, and sometimes leave a change out; full scans, restores of earlier
checkpoints and reopened indexes (a new process) come in between.

After every step the checkpoint's tree must equal what git itself writes for
a copy of the worktree with its own index, given the same information:
``git add -A`` after a full scan, ``git add -A -- <the named paths and the
gitlinks>`` after an informed one (the backend restages exactly those), and
``git read-tree`` of the checkpoint a restore wrote.  The suite's
``CHECK_TREES`` (tests/conftest.py) compares every tree written from the
restaged paths with libgit2's ``write_tree`` of the same index as well.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import stat
import subprocess
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget, worktree_index
from durability.backends.git_store import store_path
from durability.ground.errors import RestoreError
from durability.store import AttemptKey
from tests.helpers import git, make_git_repo

_BAD = os.fsdecode(b"n\xff-\xfe")  # not UTF-8
FOLDERS = ["", "a", "a/b", "a/b/c/d", "sp ace", "ü-dir", "ü-dir/日本", _BAD, f"a/{_BAD}/q"]
NAMES = ["x.txt", "y", "space name.md", "ñandú.txt", f"{_BAD}.bin", "run.sh"]
IGNORE = "*.log\nbuild/\n!keep.log\n"
#: Rules toggled in .gitignore / info/exclude: each can cover tracked files.
RULES = ["*.md", "a/b/", "*.sh", "ü-dir/"]
_GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


class World:
    """The worktree and a random source of changes; each change returns the
    paths a watcher would name for it."""

    def __init__(self, root: Path, rng: random.Random, *, utf8: bool = False) -> None:
        self.root = root
        self.rng = rng
        #: Only UTF-8 names (a name that is not sends the tree to write_tree).
        self.folders_pool = [f for f in FOLDERS if not utf8 or _BAD not in f]
        self.names_pool = [n for n in NAMES if not utf8 or _BAD not in n]
        self.bad = "x" if utf8 else _BAD
        self.counter = 0
        self.nested: list[str] = []

    # -- what is there ----------------------------------------------------------

    def _walk(self) -> tuple[list[str], list[str]]:
        files, folders = [], []
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            if rel != "." and (rel.split(os.sep)[0] in self.nested):
                dirnames[:] = []
                continue
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            for name in sorted(filenames) + [d for d in dirnames
                                             if os.path.islink(os.path.join(dirpath, d))]:
                path = name if rel == "." else f"{rel}/{name}"
                if path != ".gitignore":
                    files.append(path)
            folders += [d if rel == "." else f"{rel}/{d}" for d in dirnames
                        if not os.path.islink(os.path.join(dirpath, d))]
        return files, [f for f in folders if f.split("/")[0] not in self.nested]

    def files(self) -> list[str]:
        return self._walk()[0]

    def regular(self) -> list[str]:
        return [p for p in self.files() if not (self.root / p).is_symlink()]

    def folders(self) -> list[str]:
        return self._walk()[1]

    def fresh(self, folder: str | None = None) -> str:
        self.counter += 1
        folder = self.rng.choice(self.folders_pool) if folder is None else folder
        name = f"{self.counter}-{self.rng.choice(self.names_pool)}"
        return f"{folder}/{name}" if folder else name

    def _write(self, path: str, data: bytes) -> set[str]:
        full = self.root / path
        named = {path}
        parent = full.parent
        # A file or link standing where a folder of the path goes is replaced.
        for up in [*reversed(Path(path).parents)][1:]:
            where = self.root / up
            if where.is_symlink() or where.is_file():
                where.unlink()
                named.add(str(up))
        parent.mkdir(parents=True, exist_ok=True)
        if full.is_symlink():
            full.unlink()
        elif full.is_dir():
            shutil.rmtree(full)
        full.write_bytes(data)
        return named

    # -- changes ----------------------------------------------------------------

    def create(self) -> set[str]:
        return self._write(self.fresh(), f"line {self.rng.random()}\n".encode())

    def edit(self) -> set[str]:
        files = self.regular()
        if not files:
            return self.create()
        path = self.rng.choice(files)
        if self.rng.random() < 0.5:
            with open(self.root / path, "ab") as f:
                f.write(b"more\n")
        else:
            (self.root / path).write_bytes(f"new {self.rng.random()}\n".encode())
        return {path}

    def delete(self) -> set[str]:
        files = self.files()
        if not files:
            return self.create()
        path = self.rng.choice(files)
        (self.root / path).unlink()
        return {path}

    def empty_folder(self) -> set[str]:
        """Delete every file of a nested folder: it must leave the tree."""
        folders = [f for f in self.folders() if "/" in f] or self.folders()
        if not folders:
            return self.create()
        folder = self.rng.choice(folders)
        gone = [p for p in self.files() if p.startswith(folder + "/")]
        shutil.rmtree(self.root / folder)
        return {folder, *gone} if self.rng.random() < 0.5 else set(gone) or {folder}

    def chmod(self) -> set[str]:
        files = self.regular()
        if not files:
            return self.create()
        path = self.rng.choice(files)
        mode = os.stat(self.root / path).st_mode
        os.chmod(self.root / path, mode & ~0o111 if mode & 0o100 else mode | 0o111)
        return {path}

    def symlink(self) -> set[str]:
        path = self.fresh()
        full = self.root / path
        named = self._write(path, b"")
        full.unlink()
        choice = self.rng.random()
        files, folders = self.files(), self.folders()
        if choice < 0.4 and files:
            target = os.path.relpath(self.root / self.rng.choice(files), full.parent)
        elif choice < 0.7 and folders:
            target = os.path.relpath(self.root / self.rng.choice(folders), full.parent)
        else:
            target = f"dangling-{self.counter}"
        full.symlink_to(target)
        return named

    def retype(self) -> set[str]:
        """A file becomes a link or a link a file, at the same path."""
        files = self.files()
        if not files:
            return self.create()
        path = self.rng.choice(files)
        full = self.root / path
        link = full.is_symlink()
        full.unlink()
        if link:
            full.write_bytes(b"was a link\n")
        else:
            full.symlink_to("somewhere")
        return {path}

    def file_to_folder(self) -> set[str]:
        files = self.files()
        if not files:
            return self.create()
        path = self.rng.choice(files)
        (self.root / path).unlink()
        inner = f"{path}/inner-{self.counter}.txt"
        self.counter += 1
        (self.root / path).mkdir()
        (self.root / inner).write_bytes(b"now a folder\n")
        return self.rng.choice([{path, inner}, {path}, {inner}])

    def folder_to_file(self) -> set[str]:
        folders = self.folders()
        if not folders:
            return self.create()
        folder = self.rng.choice(folders)
        gone = [p for p in self.files() if p.startswith(folder + "/")]
        shutil.rmtree(self.root / folder)
        (self.root / folder).write_bytes(b"now a file\n")
        return self.rng.choice([{folder}, {folder, *gone}])

    def rename(self) -> set[str]:
        files = self.files()
        if not files:
            return self.create()
        src = self.rng.choice(files)
        dst = self.fresh()
        if dst.startswith(src + "/"):
            return self.create()
        named = self._write(dst, b"")
        os.replace(self.root / src, self.root / dst)
        return named | {src}

    def rename_folder(self) -> set[str]:
        folders = self.folders()
        if not folders:
            return self.create()
        src = self.rng.choice(folders)
        self.counter += 1
        dst = self.rng.choice([f"moved-{self.counter}", f"a/moved {self.counter}",
                               f"{self.bad}-{self.counter}"])
        if dst.startswith(src + "/") or not (self.root / src).is_dir() or any(
                (self.root / up).is_symlink() or (self.root / up).is_file()
                for up in Path(dst).parents):
            return self.create()
        (self.root / dst).parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.root / src, self.root / dst)
        return {src, dst}

    def ignored(self) -> set[str]:
        self.counter += 1
        return self._write(self.rng.choice([f"{self.counter}.log", f"build/{self.counter}.txt",
                                            f"a/build/{self.counter}.o", "keep.log",
                                            f"a/b/c/{self.counter}.log"]), b"ignored?\n")

    def edit_ignored(self) -> set[str]:
        """Edit a file the rules ignore, tracked or not."""
        ignored = [p for p in self.regular() if p.endswith((".log", ".o", ".md", ".sh"))
                   or "build/" in p or p.startswith("build")]
        if not ignored:
            return self.ignored()
        path = self.rng.choice(ignored)
        with open(self.root / path, "ab") as f:
            f.write(b"changed while ignored\n")
        return {path}

    def gitignore(self) -> set[str]:
        rules = (self.root / ".gitignore").read_text().splitlines()
        rule = self.rng.choice(RULES)
        rules = [r for r in rules if r != rule] if rule in rules else [*rules, rule]
        (self.root / ".gitignore").write_text("\n".join(rules) + "\n")
        return {".gitignore"}

    def exclude(self) -> set[str]:
        """info/exclude changes where the watcher does not look."""
        path = self.root / ".git" / "info" / "exclude"
        path.parent.mkdir(exist_ok=True)
        rules = path.read_text().splitlines() if path.exists() else []
        rule = self.rng.choice(RULES)
        rules = [r for r in rules if r != rule] if rule in rules else [*rules, rule]
        path.write_text("\n".join(rules) + "\n")
        return set()

    def nested_repo(self) -> set[str]:
        self.counter += 1
        name = f"sub{self.counter}"
        where = self.root / name
        where.mkdir()
        _run(where, "init", "-q", "--template=", "-b", "main")
        (where / "f.txt").write_text("in the nested repository\n")
        _run(where, "add", "f.txt")
        _run(where, "commit", "-q", "-m", "one")
        self.nested.append(name)
        return {name, f"{name}/f.txt"}

    def move_head(self) -> set[str]:
        """A commit in a nested repository: its HEAD moves, and only files
        inside its own .git change (no event names it)."""
        alive = [n for n in self.nested if (self.root / n / ".git").is_dir()]
        if not alive:
            return self.nested_repo()
        name = self.rng.choice(alive)
        _run(self.root / name, "commit", "-q", "--allow-empty", "-m", f"c{self.counter}")
        self.counter += 1
        return set()

    def drop_nested(self) -> set[str]:
        alive = [n for n in self.nested if (self.root / n).is_dir()]
        if not alive:
            return self.nested_repo()
        name = self.rng.choice(alive)
        shutil.rmtree(self.root / name)
        self.nested.remove(name)
        return {name}

    def ops(self) -> dict[str, Callable[[], set[str]]]:
        return {"create": self.create, "edit": self.edit, "delete": self.delete,
                "empty_folder": self.empty_folder, "chmod": self.chmod,
                "symlink": self.symlink, "retype": self.retype,
                "file_to_folder": self.file_to_folder, "folder_to_file": self.folder_to_file,
                "rename": self.rename, "rename_folder": self.rename_folder,
                "ignored": self.ignored, "edit_ignored": self.edit_ignored,
                "gitignore": self.gitignore, "exclude": self.exclude,
                "nested_repo": self.nested_repo, "move_head": self.move_head,
                "drop_nested": self.drop_nested}

    def weights(self) -> dict[str, int]:
        light = {"gitignore", "exclude", "nested_repo", "move_head", "drop_nested"}
        return {k: 1 if k in light else 4 for k in self.ops()}

    # -- what the watcher names -----------------------------------------------------

    def named(self, touched: set[str]) -> set[str]:
        """The paths a watcher names for ``touched``, with noise."""
        rng, named = self.rng, set(touched)
        if touched and rng.random() < 0.08:
            named.discard(rng.choice(sorted(touched)))  # a change nobody named
        if rng.random() < 0.3:  # the folders above
            named |= {str(Path(p).parent) for p in touched if "/" in p}
        if rng.random() < 0.2 and (files := self.files()):  # unchanged paths
            named |= set(rng.sample(files, min(3, len(files))))
        if rng.random() < 0.1:
            named |= {"../outside.txt", "/etc/passwd", ".git/HEAD", ".", "no/such/path"}
        if rng.random() < 0.1:  # through a symlink
            links = [p for p in self.files() if (self.root / p).is_symlink()]
            named |= {f"{p}/x.txt" for p in links[:2]}
        if touched and rng.random() < 0.03:
            return set()  # nothing named at all
        return named


def _run(where: Path, *args: str) -> None:
    done = subprocess.run(["git", *args], cwd=where, env={**os.environ, **_GIT_ENV},
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr


class Reference:
    """git itself, on a copy of the worktree with its own index."""

    def __init__(self, worktree: Path, copy: Path, index: Path) -> None:
        self.worktree, self.copy, self.index = worktree, copy, index
        #: The index as the backend last wrote its own to its file (after a
        #: full scan): what a new process reads.
        self.written = index.with_name(index.name + ".written")
        git_dir = worktree / ".git"
        user_index = git_dir / "index"
        if user_index.exists():
            shutil.copy(user_index, index)  # seeded as the backend seeds its own
        self.env = {**os.environ, **_GIT_ENV, "GIT_INDEX_FILE": str(index),
                    "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(copy),
                    "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(store_path(git_dir) / "objects"),
                    "GIT_LITERAL_PATHSPECS": "1"}
        self.save()  # what a process opening the index before any capture reads

    def git(self, *args: str | bytes, ok: tuple[int, ...] = (0,)) -> bytes:
        done = subprocess.run(["git", *args], env=self.env, cwd=self.copy,
                              capture_output=True, timeout=120)
        assert done.returncode in ok, (args, done.stderr)
        return done.stdout

    def entries(self) -> dict[str, tuple[str, str]]:
        out = self.git("ls-files", "-s", "-z")
        found = {}
        for line in filter(None, out.split(b"\0")):
            head, path = line.split(b"\t", 1)
            mode, oid, _ = head.split(b" ")
            found[os.fsdecode(path)] = (mode.decode(), oid.decode())
        return found

    def full(self) -> None:
        _mirror(self.worktree, self.copy)
        self._add([])

    def informed(self, named: set[str]) -> None:
        """``git add -A`` of what the backend restages: every named path
        (a path inside a gitlink stands for it) and every gitlink."""
        _mirror(self.worktree, self.copy)
        entries = self.entries()
        links = {p for p, (mode, _) in entries.items() if mode == "160000"}
        held = set(entries) | {str(up) for p in entries for up in Path(p).parents}
        specs, gone = set(links), set()
        for path in filter(None, map(_clean, named)):
            # A path inside a gitlink stands for it; one inside a repository
            # not recorded yet (no tracked file below it) for nothing.
            sub = next((s for s in links if path.startswith(s + "/")), None)
            if sub is None and any(
                    (self.copy / up / ".git").exists()
                    and not any(e.startswith(f"{up}/") for e in entries)
                    for up in [*reversed(Path(path).parents)][1:]):
                continue
            path = sub or path
            if _beyond_link(self.copy, path):
                # Read as gone: its entries go (git names nothing there).
                gone |= {e for e in entries if e == path or e.startswith(path + "/")}
            elif os.path.lexists(self.copy / path) or path in held:
                specs.add(path)
        if gone:
            self._update(["--force-remove", "--", *sorted(gone)])
        if specs:
            self._add(sorted(specs))

    def restored(self, tree: str) -> None:
        """The index after a restore: the checkpoint's entries, save the
        gitlinks, which a restore leaves as they were."""
        links = {p: e for p, e in self.entries().items() if e[0] == "160000"}
        self.git("read-tree", tree)
        lines = [f"0 {'0' * 40}\t{p}" for p, e in self.entries().items() if e[0] == "160000"]
        lines += [f"{m} {o}\t{p}" for p, (m, o) in links.items()]
        if lines:
            data = b"".join(os.fsencode(line) + b"\0" for line in lines)
            done = subprocess.run(["git", "update-index", "-z", "--index-info"], input=data,
                                  env=self.env, cwd=self.copy, capture_output=True, timeout=60)
            assert done.returncode == 0, done.stderr

    def _update(self, args: list[str]) -> None:
        self.git("update-index", *(os.fsencode(a) for a in args))

    def _add(self, specs: list[str]) -> None:
        done = subprocess.run(["git", "add", "-A", "--", *(os.fsencode(s) for s in specs)],
                              env=self.env, cwd=self.copy, capture_output=True, timeout=120)
        # 1: a named path is ignored (git says so, and adds the rest).
        assert done.returncode == 0 or (done.returncode == 1 and b"ignored" in done.stderr), (
            specs, done.stderr)

    def save(self) -> None:
        shutil.copy(self.index, self.written)

    def reopen(self) -> None:
        shutil.copy(self.written, self.index)

    def tree(self) -> str:
        return self.git("write-tree").decode().strip()


def _clean(path: str) -> str | None:
    parts = [p for p in Path(path).parts if p not in ("", ".")]
    if not parts or ".." in parts or parts[0] == ".git" or path.startswith("/"):
        return None
    return "/".join(parts)


def _beyond_link(root: Path, path: str) -> bool:
    """Whether a folder above ``path`` is a symlink."""
    return any((root / up).is_symlink() for up in [*reversed(Path(path).parents)][1:])


#: The mtime (whole seconds) of the next file the mirror writes: each write
#: gets another second, so git, which may compare whole seconds only and
#: sees inode numbers reused, never takes a rewritten file as unchanged.
_MTIMES = itertools.count(1_000_000_000)


def _mirror(source: Path, dest: Path, *, top: bool = True) -> None:
    """Make ``dest`` hold exactly ``source``'s files (the top ``.git``
    aside), writing only what differs."""
    dest.mkdir(exist_ok=True)
    want = {e.name: e for e in os.scandir(source) if not (top and e.name == ".git")}
    for e in os.scandir(dest):
        if e.name not in want:
            _remove(dest / e.name)
    for name, e in want.items():
        src, dst = source / name, dest / name
        if e.is_symlink():
            target = os.readlink(src)
            if not (dst.is_symlink() and os.readlink(dst) == target):
                _remove(dst)
                os.symlink(target, dst)
                _stamp(dst)
        elif e.is_dir(follow_symlinks=False):
            if dst.is_symlink() or (os.path.lexists(dst) and not dst.is_dir()):
                _remove(dst)
            _mirror(src, dst, top=False)
        elif e.is_file(follow_symlinks=False):
            data = src.read_bytes()
            if dst.is_symlink() or not dst.is_file() or dst.read_bytes() != data:
                _remove(dst)
                dst.write_bytes(data)
                _stamp(dst)
            mode = stat.S_IMODE(e.stat(follow_symlinks=False).st_mode)
            if stat.S_IMODE(os.lstat(dst).st_mode) != mode:
                os.chmod(dst, mode)


def _stamp(path: Path) -> None:
    seconds = next(_MTIMES) * 1_000_000_000
    os.utime(path, ns=(seconds, seconds), follow_symlinks=False)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


@dataclass
class Stats:
    steps: int = 0
    informed: int = 0
    #: Informed steps whose tree was written from the restaged paths.
    of_paths: int = 0
    full: int = 0
    restores: int = 0
    #: Informed steps, with a tree to start from, that fell back to write_tree: why.
    fallbacks: list[str] = field(default_factory=list)


def run_world(tmp: Path, seed: int, steps: int, *, utf8: bool = False,
              check_trees: bool = True) -> Stats:
    """``steps`` random steps; fails at the first tree that differs from git's.
    ``check_trees``: as the suite (each tree written from the restaged paths
    compared with write_tree, which also refreshes the index's tree cache),
    or as in production (that cache left invalid along the paths)."""
    rng = random.Random(seed)
    worktree = make_git_repo(tmp / "wt").resolve()
    (worktree / ".gitignore").write_text(IGNORE)
    # Tracked though ignored: added with -f before the first capture seeds.
    for path in ("force.log", "build/forced.txt", "a/b/c/forced.o"):
        (worktree / path).parent.mkdir(parents=True, exist_ok=True)
        (worktree / path).write_text("forced\n")
    git(worktree, "add", "-f", ".gitignore", "force.log", "build/forced.txt", "a/b/c/forced.o")
    git(worktree, "-c", "user.name=t", "-c", "user.email=t@example.invalid",
        "commit", "-q", "-m", "forced")
    world = World(worktree, rng, utf8=utf8)
    ref = Reference(worktree, tmp / "copy", tmp / "ref-index")
    backend = GitBackend()
    key = AttemptKey(f"tree-{seed}", "node", 0, 1)
    stats = Stats()
    done: list[str] = []  # checkpoints, oldest first
    current = ""  # the commit of the tree as it is (a restore plans from it)
    ops, weights = world.ops(), world.weights()
    kinds = list(ops)

    def check(commit_id: str, what: str) -> None:
        ours, theirs = backend.tree_id(worktree, commit_id), ref.tree()
        assert ours == theirs, (
            f"seed {seed} {what}: tree {ours} != git's {theirs}; differs at "
            f"{ref.git('diff-tree', '-r', ours, theirs)!r}")

    try:
        for step in range(steps):
            roll = rng.random()
            if done and roll < 0.05:
                # As ``durability restore`` does: planned from the capture of
                # the tree as it is, then a full capture of the tree it left.
                target = rng.choice(done[:-1] or done)
                try:
                    backend.restore(worktree, target, pre_restore=current)
                except RestoreError:
                    continue  # refused before writing anything
                stats.restores += 1
                after = backend.snapshot(worktree)
                current = after.commit_id
                ref.restored(backend.tree_id(worktree, target))
                ref.full()
                check(after.commit_id, f"step {step} restore to {target}")
                ref.save()
                continue
            if roll < 0.07:
                forget(worktree)  # a new process: the index is read from its file
                ref.reopen()
            batch = rng.choices(kinds, [weights[k] for k in kinds], k=rng.randrange(1, 4))
            touched: set[str] = set()
            for kind in batch:
                touched |= ops[kind]()
            named = world.named(touched)
            full = step == 0 or rng.random() < 0.08
            state = worktree_index(worktree)
            state.check_trees = check_trees
            had_tree, before = state.tree is not None, state.trees_of_paths
            snap = backend.snapshot(worktree, [Stamp(key=key, source="watch",
                                                     request_ids=(str(uuid.uuid4()),),
                                                     seq=step)],
                                    changed_paths=None if full else named)
            assert not state.skipped and not state.moving, (state.skipped, state.moving)
            done.append(snap.commit_id)
            current = snap.commit_id
            stats.steps += 1
            if state.last_scan == "paths":
                stats.informed += 1
                ref.informed(named)
                if state.trees_of_paths > before:
                    stats.of_paths += 1
                elif had_tree:
                    stats.fallbacks.append(f"step {step}: {batch}")
            else:
                stats.full += 1
                ref.full()
            check(snap.commit_id, f"step {step} {batch} {state.last_scan}, named {sorted(named)}")
            if state.last_scan != "paths":
                ref.save()  # a full scan writes the index to its file
    finally:
        forget(worktree)
    return stats


@pytest.mark.parametrize(("seed", "utf8", "check_trees"), [
    (11, False, True), (12, True, True), (13, True, False),
], ids=["any-names", "utf8-names", "utf8-names-unchecked"])
def test_an_informed_tree_equals_gits_over_random_steps(
        tmp_path: Path, seed: int, utf8: bool, check_trees: bool) -> None:
    stats = run_world(tmp_path, seed, 100, utf8=utf8, check_trees=check_trees)
    assert stats.steps > 85 and stats.full >= 5 and stats.restores >= 2, stats
    # Informed steps wrote their tree from the restaged paths (each checked
    # against git's, and against write_tree by CHECK_TREES), but where a name
    # is not UTF-8 or a file and a folder swapped places.
    assert stats.of_paths > stats.informed * (2 if utf8 else 1) // 3, stats
