"""A restore run by another process while the service keeps the worktree's
private index open (git backend).

``durability restore`` runs in the CLI's own process, not through the
service: it writes the private index file on disk (the files it wrote, and
a force-added ignored file it brought back, tracked again), and the service
is not told.  The service's next capture must take the index the restore
left, never its own older copy: else a file the checkpoint holds, ignored
by the rules but tracked, is silently missing from the service's later
checkpoints (and its next full scan writes the older index back over the
restore's, so every process loses it).

Everything runs for real: the service and the hook as subprocesses, the
restore in this process (``run_cli``: the command's own entry), git."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pygit2
import pytest

from durability.backends.git import forget
from durability.store import Store
from tests.helpers import (
    ServiceProcess,
    checkpoints,
    cli,
    cli_json,
    git,
    hook_payload,
    make_git_repo,
    ping,
    run_cli,
    run_cli_json,
    start_service,
    state_database,
)

RUN = "sess-beside"
KEPT = b"tracked although ignored\n"

_calls = iter(range(1, 1_000_000))


@pytest.fixture
def worktree(tmp_path: Path) -> Any:
    """A git worktree whose ``keep.log`` is tracked (``git add -f``) while
    ``.gitignore`` ignores ``*.log``."""
    wt = make_git_repo(tmp_path / "wt").resolve()
    (wt / ".gitignore").write_text("*.log\n")
    (wt / "keep.log").write_bytes(KEPT)
    git(wt, "add", ".gitignore")
    git(wt, "add", "-f", "keep.log")
    git(wt, "commit", "-q", "-m", "a forced ignored file")
    yield wt
    forget(wt)


def _hook(worktree: Path, run: str = RUN) -> None:
    payload = hook_payload(worktree, session_id=run, tool_use_id=f"toolu_{next(_calls)}")
    done = cli("snapshot-hook", input=json.dumps(payload))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def _checkpoints(run: str = RUN) -> list[Any]:
    with Store(state_database()) as store:
        return store.checkpoints(run)


def _files(worktree: Path, commit_id: str) -> set[str]:
    tree = checkpoints(worktree)[commit_id].peel(pygit2.Commit).tree
    return {e.name for e in tree}


def _stats(svc: ServiceProcess) -> dict[str, int]:
    answer = ping(svc.socket_path)
    assert answer is not None
    stats: dict[str, int] = answer["informed"]
    return stats


def _elsewhere(worktree: Path) -> str:
    """A capture by another process: the installed command, no service."""
    return str(cli_json("snapshot", str(worktree), "--run", "elsewhere", "--node", "n")
               ["commit_id"])


def _restore(run: str, seq: int) -> None:
    done = run_cli("restore", run, "--node", "session", "--seq", str(seq))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("scan", ["informed", "full"])
def test_a_restored_ignored_file_stays_in_the_services_later_checkpoints(
        worktree: Path, tmp_path: Path, scan: str) -> None:
    """The review's case: the service's index no longer tracks keep.log
    (deleted, captured), a CLI restore brings it back tracked, and the
    service's next checkpoint must hold it, whether it stages the changed
    paths only or scans the whole tree (a rescan every time here)."""
    rescan = {"informed": {}, "full": {"DURABILITY_INFORMED_RESCAN_MS": "1"}}[scan]
    svc = start_service(tmp_path, env={**os.environ, **rescan})
    try:
        _hook(worktree)  # seq 1: keep.log, tracked from the user's index
        (worktree / "keep.log").unlink()
        _hook(worktree)  # seq 2: gone, so the service's index drops it
        _restore(RUN, 1)  # keep.log written back, tracked
        assert (worktree / "keep.log").read_bytes() == KEPT
        (worktree / "README.md").write_text("after the restore\n")
        _hook(worktree)  # seq 3
        stats = _stats(svc)
    finally:
        svc.stop()
    rows = _checkpoints()
    assert [r.seq for r in rows] == [1, 2, 3]  # the pre-restore one dedups onto seq 2
    assert "keep.log" in _files(worktree, rows[0].commit_id)
    assert "keep.log" not in _files(worktree, rows[1].commit_id)
    assert {"keep.log", "README.md"} <= _files(worktree, rows[2].commit_id), stats
    # And every other process still sees it tracked (the service wrote no
    # older index over the restore's): a capture with no service.
    forget(worktree)
    after = run_cli_json("snapshot", str(worktree), "--run", "after", "--node", "n")
    assert "keep.log" in _files(worktree, str(after["commit_id"]))


def test_a_restore_of_another_run_is_never_answered_quietly(
        worktree: Path, tmp_path: Path) -> None:
    """The restore's only write is the ignored file, and its pre-restore
    checkpoint went on another run: the hook's attempt saw no event that
    counts and no new checkpoint of its own.  The quiet answer (the last
    checkpoint, no scan) would leave keep.log out: the index changed
    under the service, so it captures."""
    svc = start_service(tmp_path)
    try:
        _hook(worktree, "other")  # the other run's seq 1 holds keep.log
        (worktree / "keep.log").unlink()
        _hook(worktree)  # this session's seq 1: no keep.log
        _hook(worktree)  # quiet: nothing changed
        assert _stats(svc)["quiet"] == 1
        _restore("other", 1)  # writes keep.log alone, tracked again
        _hook(worktree)
        stats = _stats(svc)
    finally:
        svc.stop()
    assert stats["quiet"] == 1, stats  # the call after the restore captured
    rows = _checkpoints()
    assert "keep.log" not in _files(worktree, rows[0].commit_id)
    assert "keep.log" in _files(worktree, rows[-1].commit_id), [r.seq for r in rows]


def test_a_cli_capture_after_a_restore_in_a_long_lived_process_keeps_the_file(
        worktree: Path, tmp_path: Path) -> None:
    """The other direction: the restore runs in a process that keeps the
    index open (this one, as the MCP server or a run's runner do), then a
    capture runs in another process (a hook with no service), then this
    process captures again.  Each takes what the last writer left."""
    from durability.capture.snapshot import snapshot_now
    from durability.config import Settings
    from durability.store import AttemptKey

    settings = Settings.from_env()
    key = AttemptKey(RUN, "session", 0, 1)

    def here() -> set[str]:
        done = snapshot_now(settings, key=key, path=worktree, request_id=f"r-{next(_calls)}")
        assert done.ok and done.commit_id is not None
        return _files(worktree, done.commit_id)

    assert "keep.log" in here()  # seq 1
    (worktree / "keep.log").unlink()
    assert "keep.log" not in here()  # seq 2: this process's index drops it
    _restore(RUN, 1)  # in this process, on the same open index
    # Another process (no service answers: it captures itself).
    assert "keep.log" in _files(worktree, _elsewhere(worktree))
    # The other process dropped it from the index it wrote (deleted then,
    # as git add -A would); this process follows that index, so the file
    # made again, ignored, is not recorded from an older tracked entry.
    (worktree / "keep.log").unlink()
    assert "keep.log" not in _files(worktree, _elsewhere(worktree))
    (worktree / "keep.log").write_bytes(b"made again, ignored now\n")
    assert "keep.log" not in here()
