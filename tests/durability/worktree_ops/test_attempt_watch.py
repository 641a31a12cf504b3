"""An attempt's watch (issue 25): armed without a baseline capture (the
attempt's start capture is that), ended without a final capture (the
attempt's end capture, taken after the watch ended, answers everything it
heard), through the service and in process; what the watch hears while the
attempt runs is still captured in the attempt's name, and nothing is left
behind: no watch, no open settle window, no gap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.ground import client
from durability.store import AttemptKey, Store
from durability.worktree_ops.attempt_watch import AttemptWatches
from tests.helpers import make_git_repo, make_jj_repo, wait_for


def _labels(settings: Settings, key: AttemptKey) -> list[tuple[str, str | None]]:
    with Store(settings.database) as store:
        return [(c.source, c.label) for c in store.checkpoints(key.run_id)]


def _files(settings: Settings, key: AttemptKey, worktree: Path) -> set[str]:
    """The files of the attempt's last checkpoint."""
    import pygit2

    from durability.inspect.repository import open_checkpoints

    with Store(settings.database) as store:
        last = store.checkpoints(key.run_id)[-1]
    tree = open_checkpoints(worktree)[last.commit_id].peel(pygit2.Commit).tree
    return {e.name for e in tree}


def _nothing_left(settings: Settings, key: AttemptKey) -> None:
    windows = settings.window_dir
    assert not windows.exists() or os.listdir(windows) == []
    with Store(settings.database) as store:
        assert store.gaps(key.run_id) == []


def _attempt(settings: Settings, repo: Path, key: AttemptKey) -> None:
    watches = AttemptWatches(settings)
    with watches.around(key, str(repo)):
        (repo / "during.txt").write_text("written while the attempt runs\n")
        # The watch records it in the attempt's name (a settle capture) ...
        wait_for(lambda: ("watch", "watch settle") in _labels(settings, key), timeout=60)
        # ... and what comes after its last capture is the end capture's.
        (repo / "last.txt").write_text("written just before the attempt ends\n")


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_through_the_service_the_start_and_end_captures_stand_for_the_watch_s_own(
        tmp_path: Path, settings: Settings, service_inprocess: object, kind: str) -> None:
    repo = (make_git_repo(tmp_path / "repo") if kind == "git"
            else make_jj_repo(tmp_path / "repo")).resolve()
    key = AttemptKey("served", "task", 0, 1)
    _attempt(settings, repo, key)
    # No "watch baseline" before the watch's settle capture, no "watch final" after the end.
    assert _labels(settings, key) == [("attempt", "attempt start"), ("watch", "watch settle"),
                                      ("attempt", "attempt end")]
    assert {"during.txt", "last.txt"} <= _files(settings, key, repo)
    answer = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
    assert answer["watches"] == []
    _nothing_left(settings, key)


def test_without_a_service_the_watch_in_process_does_the_same(
        tmp_path: Path, settings: Settings) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    key = AttemptKey("local", "task", 0, 1)
    _attempt(settings, repo, key)
    assert _labels(settings, key) == [("attempt", "attempt start"), ("watch", "watch settle"),
                                      ("attempt", "attempt end")]
    assert {"during.txt", "last.txt"} <= _files(settings, key, repo)
    _nothing_left(settings, key)


def test_a_plain_unwatch_still_takes_its_final_capture(
        tmp_path: Path, settings: Settings, service_inprocess: object) -> None:
    """The engine's shortcut is asked for; a user's `unwatch` is unchanged."""
    from durability.watch.foreground import request_unwatch, request_watch
    from durability.watch.watch import WatchSpec

    repo = make_git_repo(tmp_path / "repo").resolve()
    key = AttemptKey("user", "watch", 0, 1)
    request_watch(settings, WatchSpec(repo, key, settle_ms=5_000, max_delay_ms=5_000))
    wait_for(lambda: ("watch", "watch settle") in _labels(settings, key), timeout=60)
    (repo / "unsettled.txt").write_text("not settled when the watch ends\n")
    answer = request_unwatch(settings, repo)
    assert answer["final"] is not None
    assert _labels(settings, key)[-1] == ("watch", "watch final")
    assert "unsettled.txt" in _files(settings, key, repo)
