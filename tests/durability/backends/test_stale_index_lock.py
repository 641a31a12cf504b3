"""A capture killed while libgit2 writes the private index leaves
``<index>.lock`` behind.  Every write of the index holds an flock beside it
(``index_lock``), which the kernel drops with a dead writer, so such a file
found under it is a dead writer's: the next capture removes it (with a
warning) instead of failing "the index is locked" for good; a live writer's,
even of another state folder, is never removed."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

from durability.backends.git import GitBackend
from durability.backends.git_repo import private_index_path
from durability.doctor.checks import run_checks
from tests.durability.hook.test_entry import checkpoints, run_hook
from tests.helpers import (
    commit_manifest,
    hook_payload,
    make_git_repo,
    run_cli,
    run_cli_json,
    wait_for,
)

# A real capture in its own process, whose index writer pauses once it holds
# the lock file, as libgit2 does between creating ``<index>.lock`` and
# renaming it over the index: the window a kill -9 must land in.
_PAUSING_CAPTURE = r"""
import os, sys, time
from pathlib import Path
import pygit2
from durability.capture.capturer import CaptureRequest, Capturer
from durability.config import Settings
from durability.backends.git_repo import private_index_path
from durability.store import Store
from durability.store.models import AttemptKey

worktree, ready, window = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
settings = Settings.from_env()
capturer = Capturer(settings=settings, store=lambda: Store(settings.database))

def capture(n):
    capturer.capture([CaptureRequest(key=AttemptKey("killed-run", "hook", 1), worktree=worktree,
                                     request_id=f"req-{n}", source="hook", label=str(n))],
                     lock_timeout_s=30)

if window == "stage":  # else the first write of a fresh private index
    capture(0)

def pausing_write(self, *args):
    state = pygit2.Repository(str(worktree))
    lock = str(private_index_path(state, worktree)) + ".lock"
    fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, b"DIRC\0\0\0\2")  # a half-written index
    ready.write_text(str(os.getpid()))
    while True:
        time.sleep(1)

pygit2.Index.write = pausing_write
(worktree / "killed.txt").write_text("written by the killed call")
capture(1)
"""


def _kill_inside_the_index_lock_window(tmp_path: Path, worktree: Path, window: str) -> Path:
    ready = tmp_path / "ready"
    child = subprocess.Popen([sys.executable, "-c", _PAUSING_CAPTURE, str(worktree), str(ready),
                              window])
    try:
        wait_for(lambda: ready.exists() or child.poll() is not None, timeout=60)
        assert child.poll() is None, "the capture exited before it took the index lock"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
    lock = _lock_path(pygit2.Repository(str(worktree)), worktree)
    assert lock.exists()
    return lock


@pytest.mark.parametrize("window", ["stage", "fresh"])
def test_a_capture_killed_inside_the_index_lock_window_blocks_no_later_capture(
        tmp_path: Path, window: str) -> None:
    worktree = make_git_repo(tmp_path / "proj")
    lock = _kill_inside_the_index_lock_window(tmp_path, worktree, window)

    # doctor names the lock left behind
    backend = next(c for c in run_checks(_settings(), os.environ, worktree) if c.name == "backend")
    assert backend.status == "warn" and str(lock) in backend.detail, backend

    for n in range(3):
        (worktree / f"f{n}.txt").write_text(f"edit {n}\n")
        run_hook(hook_payload(worktree, session_id="after-kill", tool_use_id=f"t{n}"))
    rows = checkpoints("after-kill")
    assert [r.seq for r in rows] == [1, 2, 3]
    assert run_cli_json("gaps", "after-kill") == []
    assert not lock.exists()
    assert commit_manifest(worktree, rows[-1].commit_id)["f2.txt"][2] == b"edit 2\n"


def test_a_stale_index_lock_is_removed_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    worktree = make_git_repo(tmp_path / "proj")
    GitBackend().snapshot(worktree)  # the private index exists
    lock = _lock_path(pygit2.Repository(str(worktree)), worktree)
    lock.write_bytes(b"DIRC")  # as a writer killed mid-write leaves it
    (worktree / "new.txt").write_text("new\n")
    with caplog.at_level(logging.WARNING, logger="durability.backends"):
        snap = GitBackend().snapshot(worktree)
    assert not lock.exists()
    assert any("stale private index lock" in r.getMessage() and str(lock) in r.getMessage()
               for r in caplog.records), caplog.records
    assert "new.txt" in commit_manifest(worktree, snap.commit_id)
    # a snapshot from the command line (a fresh process) after a second kill
    lock.write_bytes(b"DIRC")
    done = run_cli("snapshot", str(worktree), "--run", "manual", "--node", "main")
    assert done.returncode == 0, done.stderr
    assert not lock.exists()
    # and a restore (its pre-restore capture clears it first)
    (worktree / "new.txt").write_text("changed\n")
    lock.write_bytes(b"DIRC")
    done = run_cli("restore", "manual", "--node", "main", "--seq", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert (worktree / "new.txt").read_text() == "new\n"
    assert not lock.exists()
    backend = next(c for c in run_checks(_settings(), os.environ, worktree) if c.name == "backend")
    assert backend.status == "ok", backend


# A live writer of the private index in another process, of another state
# folder (the worktree lock is per state folder, the index per repository):
# it pauses holding ``<index>.lock`` until told to go on, then writes.
_LIVE_WRITER = r"""
import os, sys, time
from pathlib import Path
import pygit2
from durability.backends.git import GitBackend
from durability.backends.git_repo import private_index_path

worktree, ready, go = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
real_write = pygit2.Index.write

def pausing_write(self, *args):
    lock = str(private_index_path(pygit2.Repository(str(worktree)), worktree)) + ".lock"
    fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    os.write(fd, b"DIRC\0\0\0\2")  # half written
    ready.write_text(str(os.getpid()))
    while not go.exists():
        time.sleep(0.01)
    os.close(fd)
    os.unlink(lock)  # as libgit2 renames it over the index
    real_write(self, *args)

pygit2.Index.write = pausing_write
(worktree / "theirs.txt").write_text("written by the other toolkit")
GitBackend().snapshot(worktree)
"""


def test_a_live_writers_index_lock_is_never_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from durability.backends import index_lock
    from durability.ground.errors import GitFailed

    worktree = make_git_repo(tmp_path / "proj")
    GitBackend().snapshot(worktree)  # the private index exists
    lock = _lock_path(pygit2.Repository(str(worktree)), worktree)
    ready, go = tmp_path / "ready", tmp_path / "go"
    env = {**os.environ, "DURABILITY_HOME": str(tmp_path / "other-home")}
    child = subprocess.Popen([sys.executable, "-c", _LIVE_WRITER, str(worktree), str(ready),
                              str(go)], env=env)
    try:
        wait_for(lambda: ready.exists() or child.poll() is not None, timeout=60)
        assert child.poll() is None, "the other writer exited before it took the index lock"
        (worktree / "ours.txt").write_text("ours\n")
        monkeypatch.setattr(index_lock, "WAIT_S", 0.3)
        with pytest.raises(GitFailed, match="being written by another process"):
            GitBackend().snapshot(worktree)
        assert lock.read_bytes() == b"DIRC\0\0\0\2"  # the live writer's lock stays
        backend = next(c for c in run_checks(_settings(), os.environ, worktree)
                       if c.name == "backend")
        assert backend.status == "ok", backend  # a lock held by a live writer is no warning

        # a write that finds the other one finishing waits for it
        monkeypatch.setattr(index_lock, "WAIT_S", 60.0)
        done: list[str] = []
        waiting = threading.Thread(
            target=lambda: done.append(GitBackend().snapshot(worktree).commit_id))
        waiting.start()
        go.touch()
        waiting.join(90)
        assert child.wait(60) == 0
    finally:
        go.touch()
        child.kill()
        child.wait(30)
    assert done and not lock.exists()
    manifest = commit_manifest(worktree, done[0])
    assert "ours.txt" in manifest and "theirs.txt" in manifest
    assert pygit2.Index(str(private_index_path(pygit2.Repository(str(worktree)), worktree)))


def _lock_path(repo: pygit2.Repository, worktree: Path) -> Path:
    index = private_index_path(repo, worktree)
    return index.with_name(index.name + ".lock")


def _settings():  # type: ignore[no-untyped-def]
    from durability.config import Settings

    return Settings.from_env()
