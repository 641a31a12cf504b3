"""Property: random writers against concurrent captures, on both backends.

Writers create, overwrite, truncate, delete, rename, chmod, swap in a
symlink (by rename) and turn files into folders, while a capture thread
captures again and again.  Every state each path goes through is recorded
(the writers' system calls and records happen under one lock, so the record
is the order the filesystem saw).  Checked (docs/RELIABILITY.md, "Writers
during a capture"):

- no capture fails;
- in every checkpoint, each path holds a state that path really had;
  Linux lets a read see one write(2) in progress: a writer paused inside
  the call (a loaded machine) leaves the file holding the pages written so
  far, with stat data that do not move until the call goes on, so such a
  prefix (a whole number of pages of what is being written) is a state too;
- the capture after the writers stop equals the tree on disk.

Derandomized (same examples every run) and kept small: a few seconds per
backend.
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget
from durability.backends.jj import JjBackend, find_jj, git_dir
from durability.store import AttemptKey
from tests.helpers import checkpoints, jj_path, make_git_repo, make_jj_repo

TOP = ("a", "b", "c")
FILES = (*TOP, "d/e", "d/f")
SWAP = ".swap"
UNIVERSE = (*FILES, SWAP, *(f"{t}/inner" for t in TOP))
SIZES = (0, 10, 4096, 70_000)
PAGE = os.sysconf("SC_PAGE_SIZE")

#: A path's state: ("absent",), ("dir",), ("file", content, executable), ("link", target).
State = tuple[object, ...]
ABSENT: State = ("absent",)

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(FILES), st.sampled_from(SIZES)),
    st.tuples(st.just("truncate"), st.sampled_from(FILES), st.integers(0, 5000)),
    st.tuples(st.just("delete"), st.sampled_from(FILES), st.just(0)),
    st.tuples(st.just("rename"), st.sampled_from(FILES), st.integers(0, len(FILES) - 1)),
    st.tuples(st.just("chmod"), st.sampled_from(FILES), st.just(0)),
    st.tuples(st.just("symlink"), st.sampled_from(FILES), st.integers(0, 3)),
    st.tuples(st.just("folder"), st.sampled_from(TOP), st.sampled_from(SIZES)),
)
Op = tuple[str, str, int]
scenario = st.tuples(st.lists(op, min_size=5, max_size=30),
                     st.lists(op, min_size=5, max_size=30),
                     st.integers(0, 2**16))


@dataclass
class Tree:
    """The worktree, changed only through ``apply``, with every path's history."""

    root: Path
    lock: threading.Lock = field(default_factory=threading.Lock)
    history: dict[str, list[State]] = field(default_factory=dict)
    touched: set[str] = field(default_factory=set)
    count: int = 0

    def state(self, path: str) -> State:
        return self.history[path][-1]

    def record(self, path: str, state: State) -> None:
        self.history.setdefault(path, [ABSENT])
        if self.history[path][-1] != state:
            self.history[path].append(state)
        self.touched.add(path)
        top = path.split("/")[0]
        if top in TOP and path != top:  # a folder is there while it holds a file
            self.record(top, ("dir",) if state != ABSENT else ABSENT)

    def apply(self, who: int, step: Op) -> None:
        kind, path, arg = step
        with self.lock:
            self.count += 1
            getattr(self, "_" + kind)(path, arg, f"{who}-{self.count}")

    # -- the writers' operations; each system call is followed by its record

    def _write(self, path: str, size: int, tag: str) -> None:
        if not self._clear_for_file(path):
            return
        full = self.root / path
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            executable = bool(os.fstat(fd).st_mode & 0o100)
            self.record(path, ("file", b"", executable))
            content = (tag.encode() + b".") * (size // (len(tag) + 1) + 1)
            # The pages a reader may see while this one call is under way.
            for cut in range(PAGE, size, PAGE):
                self.record(path, ("file", content[:cut], executable))
            os.write(fd, content[:size] if size else tag.encode())
            self.record(path, ("file", content[:size] if size else tag.encode(), executable))
        finally:
            os.close(fd)

    def _truncate(self, path: str, size: int, _tag: str) -> None:
        current = self.state(path)
        if current[0] == "file":
            os.truncate(self.root / path, size)
            data = current[1]
            assert isinstance(data, bytes)
            self.record(path, ("file", data[:size] + b"\0" * max(0, size - len(data)),
                               current[2]))

    def _delete(self, path: str, _arg: int, _tag: str) -> None:
        current = self.state(path)
        if current[0] in ("file", "link"):
            os.unlink(self.root / path)
            self.record(path, ABSENT)
        elif current[0] == "dir":
            os.unlink(self.root / path / "inner")
            self.record(f"{path}/inner", ABSENT)
            os.rmdir(self.root / path)

    def _rename(self, path: str, other: int, _tag: str) -> None:
        target = FILES[other]
        moved = self.state(path)
        if moved[0] not in ("file", "link") or target == path or self.state(target)[0] == "dir":
            return
        os.rename(self.root / path, self.root / target)
        self.record(path, ABSENT)
        self.record(target, moved)

    def _chmod(self, path: str, _arg: int, _tag: str) -> None:
        current = self.state(path)
        if current[0] == "file":
            os.chmod(self.root / path, 0o644 if current[2] else 0o755)
            self.record(path, ("file", current[1], not current[2]))

    def _symlink(self, path: str, target: int, _tag: str) -> None:
        if self.state(path)[0] == "dir":
            return
        text = f"target-{target}"
        os.symlink(text, self.root / SWAP)
        self.record(SWAP, ("link", text))
        os.rename(self.root / SWAP, self.root / path)
        self.record(SWAP, ABSENT)
        self.record(path, ("link", text))

    def _folder(self, path: str, size: int, tag: str) -> None:
        if self.state(path)[0] == "dir":
            return
        if self.state(path) != ABSENT:
            os.unlink(self.root / path)
            self.record(path, ABSENT)
        os.mkdir(self.root / path)  # an empty folder is not in a checkpoint
        self._write(f"{path}/inner", size, tag)

    def _clear_for_file(self, path: str) -> bool:
        current = self.state(path)
        if current[0] == "dir":
            return False
        if current[0] == "link":  # never write through a symlink
            os.unlink(self.root / path)
            self.record(path, ABSENT)
        return True


def _flatten(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str = "") -> dict[str, State]:
    found: dict[str, State] = {}
    for entry in tree:
        path = prefix + str(entry.name)
        if entry.filemode == pygit2.enums.FileMode.TREE:
            found[path] = ("dir",)
            found.update(_flatten(repo, repo[entry.id].peel(pygit2.Tree), path + "/"))
        elif entry.filemode == pygit2.enums.FileMode.LINK:
            found[path] = ("link", bytes(repo[entry.id].read_raw()).decode())
        else:
            executable = entry.filemode == pygit2.enums.FileMode.BLOB_EXECUTABLE
            found[path] = ("file", bytes(repo[entry.id].read_raw()), executable)
    return found


def _checkpoint(repo: pygit2.Repository, commit_id: str) -> dict[str, State]:
    flat = _flatten(repo, repo[commit_id].peel(pygit2.Commit).tree)
    return {p: flat.get(p, ABSENT) for p in UNIVERSE}


def _run(root: Path, tree: Tree, writers: tuple[list[Op], list[Op]], seed: int,
         capture: Callable[[set[str] | None], str], pause_s: float) -> list[str]:
    """The writers and a capture thread at once; the commits captured, the
    last one taken after the writers stopped.  Writers pause 0 to 3
    ``pause_s`` between steps, so several captures fall inside a run."""
    commits: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def write(who: int, steps: list[Op]) -> None:
        pace = random.Random(seed + who)
        try:
            for step in steps:
                tree.apply(who, step)
                time.sleep(pace.choice((0, 0, 1, 3)) * pause_s)
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)

    def captures() -> None:
        informed = random.Random(seed)
        try:
            while not stop.is_set():
                with tree.lock:  # the paths changed before this capture begins
                    changed, tree.touched = tree.touched, set()
                commits.append(capture(changed if informed.random() < 0.5 else None))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i, w)) for i, w in enumerate(writers)]
    capturer = threading.Thread(target=captures)
    capturer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    capturer.join(60)
    assert errors == []
    commits.append(capture(tree.touched))
    return commits


def _check(repo: pygit2.Repository, tree: Tree, commits: list[str]) -> None:
    for commit in commits:
        for path, state in _checkpoint(repo, commit).items():
            assert state in tree.history[path], (commit, path, state)
    final = _checkpoint(repo, commits[-1])
    assert final == {p: tree.state(p) for p in UNIVERSE}


def _fresh(root: Path) -> Tree:
    (root / "d").mkdir()
    tree = Tree(root, history={p: [ABSENT] for p in UNIVERSE})
    for path in FILES:
        tree.apply(9, ("write", path, 10))
    return tree


def _settings(examples: int) -> settings:
    # Derandomized: CI runs the same examples every time; a failure found
    # once is found again.  No deadline: a capture's time varies with load.
    return settings(max_examples=examples, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@_settings(25)
@given(scenario)
def test_git_captures_under_random_writers(tmp_path: Path,
                                           case: tuple[list[Op], list[Op], int]) -> None:
    root = make_git_repo(tmp_path / uuid.uuid4().hex, commit=False).resolve()
    tree = _fresh(root)
    key = AttemptKey("run-p", "node", 0, 1)

    def capture(changed: set[str] | None) -> str:
        stamp = Stamp(key=key, source="watch", request_ids=(uuid.uuid4().hex,))
        return GitBackend().snapshot(root, [stamp], changed_paths=changed).commit_id

    try:
        commits = _run(root, tree, (case[0], case[1]), case[2], capture, 0.001)
        _check(checkpoints(root), tree, commits)
    finally:
        forget(root)


@pytest.mark.slow
@_settings(15)
@given(scenario)
def test_jj_captures_under_random_writers(tmp_path: Path,
                                          case: tuple[list[Op], list[Op], int]) -> None:
    root = make_jj_repo(tmp_path / uuid.uuid4().hex).resolve()
    tree = _fresh(root)
    backend = JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)
    # A jj capture takes tens of ms: slower writers, so several fall inside.
    commits = _run(root, tree, (case[0], case[1]), case[2],
                   lambda _changed: backend.snapshot(root).commit_id, 0.02)
    _check(pygit2.Repository(str(git_dir(root))), tree, commits)


def test_the_history_is_what_the_disk_holds(tmp_path: Path) -> None:
    """The recorder itself: after a run of every operation, the last state
    recorded for each path is what the filesystem holds."""
    root = tmp_path / "w"
    root.mkdir()
    tree = _fresh(root)
    steps: list[Op] = [("chmod", "a", 0), ("rename", "a", 1), ("symlink", "c", 2),
                       ("write", "c", 4096), ("folder", "a", 10), ("truncate", "b", 3),
                       ("delete", "d/e", 0), ("folder", "b", 0), ("delete", "a", 0)]
    for step in steps:
        tree.apply(0, step)
    for path in UNIVERSE:
        assert tree.state(path) == _on_disk(root / path), path


def test_a_write_in_progress_is_recorded_page_by_page(tmp_path: Path) -> None:
    """The recorder lists what a reader can see during one large write(2):
    each whole number of pages of the new content, nothing else."""
    root = tmp_path / "w"
    root.mkdir()
    tree = _fresh(root)
    tree.apply(1, ("write", "a", 70_000))
    content = (root / "a").read_bytes()
    assert len(content) == 70_000
    states = tree.history["a"]
    assert ("file", content[:PAGE], False) in states
    assert ("file", content[:16 * PAGE], False) in states  # one seen in a checkpoint
    assert ("file", content[:PAGE + 1], False) not in states
    assert not any(s[0] == "file" and s[1] == content[:PAGE] for s in tree.history["b"])
    assert states[-1] == ("file", content, False)
    tree.apply(1, ("write", "b", 4096))  # one page: no state between
    assert [s[1] for s in tree.history["b"][-2:]] == [b"", (root / "b").read_bytes()]


def _on_disk(full: Path) -> State:
    if full.is_symlink():
        return ("link", os.readlink(full))
    if full.is_dir():
        return ("dir",) if any(full.iterdir()) else ABSENT
    if full.is_file():
        return ("file", full.read_bytes(), bool(full.stat().st_mode & 0o100))
    return ABSENT


pytestmark = pytest.mark.timeout(300)
