"""A large restore writes from several threads (``backends.write_pool``):
the same files, modes, links, refusals and undo as one thread, on real git
and jj worktrees; the first failure stops the other threads and is raised."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from durability.backends import write_pool
from durability.backends.confined import ConfinedTree
from durability.backends.git import forget
from durability.capture.restore import restore
from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.errors import RestoreError
from engine import AttemptKey
from tests.helpers import make_git_repo, make_jj_repo, tree_manifest

KEY = AttemptKey("run-pool", "node", 0, 1)
FILES = 1200


@pytest.fixture
def threaded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every restore of 512+ writes uses three threads, whatever the
    machine's core count; the thread counts actually used are recorded."""
    used: list[int] = []
    real = write_pool._parallel

    def spy(*args: object) -> object:
        used.append(int(args[-1]))  # type: ignore[call-overload]
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(write_pool, "_threads", lambda count: 3 if count >= 512 else 1)
    monkeypatch.setattr(write_pool, "_parallel", spy)
    return used


@pytest.fixture(params=["git", "jj"])
def wt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    make = make_git_repo if request.param == "git" else make_jj_repo
    path = make(tmp_path / "wt").resolve()
    yield path
    forget(path)


def _fill(wt: Path, version: str) -> None:
    for i in range(FILES):
        folder = wt / f"d{i % 7}" / f"e{i % 3}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i:04d} ü.txt").write_text(f"{version} {i}\n")
    (wt / "run.sh").write_text(f"#!/bin/sh\necho {version}\n")
    (wt / "run.sh").chmod(0o755 if version == "one" else 0o644)
    (wt / "secret.txt").write_text(version)
    (wt / "secret.txt").chmod(0o600)
    link = wt / "link"
    link.unlink(missing_ok=True)
    link.symlink_to("d0/e0/f0000 ü.txt" if version == "one" else "run.sh")


def _snap(settings: Settings, wt: Path) -> int:
    done = snapshot_now(settings, key=KEY, path=wt, request_id=str(uuid.uuid4()))
    assert done.seq is not None, done
    return done.seq


def test_a_threaded_restore_writes_what_one_thread_writes_and_undoes(
        wt: Path, settings: Settings, threaded: list[int]) -> None:
    _fill(wt, "one")
    first, want = _snap(settings, wt), tree_manifest(wt)
    _fill(wt, "two")
    for i in range(0, FILES, 5):  # some files gone, some folders emptied
        (wt / f"d{i % 7}" / f"e{i % 3}" / f"f{i:04d} ü.txt").unlink()
    (wt / "extra").mkdir()
    (wt / "extra" / "new.txt").write_text("only in two\n")
    _snap(settings, wt)
    changed = tree_manifest(wt)
    done = restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=first)
    assert threaded == [3]  # the writes really were split between threads
    assert tree_manifest(wt) == want
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=done.pre_restore_seq)
    assert tree_manifest(wt) == changed
    # The undo puts back the modes the restore replaced (kept by its thread).
    assert oct(os.stat(wt / "secret.txt").st_mode & 0o777) == oct(0o600)


def test_a_symlinked_folder_met_by_one_thread_stops_the_restore_confined(
        wt: Path, settings: Settings, threaded: list[int], tmp_path: Path) -> None:
    _fill(wt, "one")
    first = _snap(settings, wt)
    _fill(wt, "two")
    _snap(settings, wt)
    outside = tmp_path / "outside"
    outside.mkdir()
    real_write = ConfinedTree.write_file
    swapped = threading.Event()

    def swap_then_write(self: ConfinedTree, rel: str, data: bytes, mode: int, *,
                        exact_mode: bool = False) -> os.stat_result:
        # Halfway through, the last folder (written by another thread) is
        # replaced by a link to a folder outside the worktree.
        if rel.startswith("d3/") and not swapped.is_set():
            swapped.set()
            victim = wt / "d6" / "e2"
            victim.rename(tmp_path / "away")
            victim.symlink_to(outside)
        return real_write(self, rel, data, mode, exact_mode=exact_mode)

    ConfinedTree.write_file = swap_then_write  # type: ignore[method-assign]
    try:
        with pytest.raises(RestoreError) as info:
            restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=first)
    finally:
        ConfinedTree.write_file = real_write  # type: ignore[method-assign]
    assert swapped.is_set() and threaded == [3]
    assert info.value.code == "restore-conflict"
    assert "d6/e2" in info.value.message
    assert list(outside.iterdir()) == []  # nothing written through the link


def test_the_first_failure_stops_the_other_threads_and_is_raised(
        tmp_path: Path, threaded: list[int]) -> None:
    done: list[int] = []
    lock = threading.Lock()
    failed = threading.Event()

    def write(tree: ConfinedTree, item: int) -> int:
        if item == 10:
            failed.set()
            raise RestoreError("stop here", code="restore-conflict")
        if item >= 500:
            failed.wait(10)  # the other runs go on only once the first has failed
        with lock:
            done.append(item)
        return item * 2

    with ConfinedTree(tmp_path) as tree, pytest.raises(RestoreError, match="stop here"):
        write_pool.write_all(tree, list(range(1500)), write)
    # The failing run stopped at its item; each other run finished at most
    # the item it was in when the failure came, of its 500.
    assert [d for d in done if d < 500] == list(range(10))
    assert len([d for d in done if d >= 500]) <= 2
    steps: list[int] = []
    with ConfinedTree(tmp_path) as tree:
        results = write_pool.write_all(tree, list(range(1500)), lambda _t, i: i * 2,
                                       lambda: steps.append(1))
    assert results == [i * 2 for i in range(1500)] and len(steps) == 1500
    assert threaded == [3, 3]
