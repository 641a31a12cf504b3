"""The service's internal watches (``watch/tracked.py``) on their own: real
inotify through watchdog, real repositories."""

from __future__ import annotations

import os
from pathlib import Path

from durability.watch.tracked import Tracker
from tests.helpers import make_git_repo, make_jj_repo


def test_first_take_names_nothing_then_paths_then_quiet(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    tracker = Tracker(max_worktrees=4, max_watches=1000)
    try:
        first = tracker.prepare(repo)
        assert first is not None and (first.paths, first.quiet) == (None, False)
        (repo / "new.txt").write_text("x")
        second = tracker.prepare(repo)
        assert second is not None and second.paths == {"new.txt"} and not second.quiet
        third = tracker.prepare(repo)
        assert third is not None and (third.paths, third.quiet) == (frozenset(), True)
    finally:
        tracker.close()


def test_a_jj_only_worktree_is_quiet_behind_its_barrier_in_dot_jj(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "jjonly", colocate=False)
    tracker = Tracker(max_worktrees=4, max_watches=1000)
    try:
        tracker.prepare(repo)
        quiet = tracker.prepare(repo)
        assert quiet is not None and quiet.quiet and quiet.paths is None
        (repo / "f").write_text("x")
        moved = tracker.prepare(repo)
        assert moved is not None and not moved.quiet
    finally:
        tracker.close()


def test_a_new_folder_the_watch_could_not_cover_rearms_it(tmp_path: Path) -> None:
    """watchdog swallows a failure to watch a new subfolder (the user's watch
    limit); the watch sees the folder is not in watchdog's own list and the
    next capture scans whole."""
    repo = make_git_repo(tmp_path / "repo")
    tracker = Tracker(max_worktrees=4, max_watches=1000)
    try:
        tracker.prepare(repo)
        [tracked] = tracker._tracked.values()
        tracked._watched = frozenset()  # as if no new folder could be watched
        (repo / "sub").mkdir()
        (repo / "sub" / "f").write_text("x")
        # The folder's event is in by the end of this prepare (its barrier);
        # it may have been before the check, or only for the next call.
        after = tracker.prepare(repo)
        if tracker.rearmed == 0:
            assert after is not None and (after.paths is None or "sub" in after.paths)
            after = tracker.prepare(repo)
        assert tracker.rearmed == 1
        assert after is not None and after.paths is None and not after.quiet  # a full scan
    finally:
        tracker.close()


def test_least_recently_captured_worktrees_are_dropped_first(tmp_path: Path) -> None:
    repos = [make_git_repo(tmp_path / f"r{i}") for i in range(3)]
    tracker = Tracker(max_worktrees=2, max_watches=1000)
    try:
        tracker.prepare(repos[0])
        tracker.prepare(repos[1])
        tracker.prepare(repos[0])  # r1 is now the least recently captured
        tracker.prepare(repos[2])
        assert tracker.worktrees() == [repos[0], repos[2]] and tracker.evicted == 1
        folders = tracker.watches()
        assert folders >= 2 * len(os.listdir(repos[0] / ".git"))  # .git is watched too
    finally:
        tracker.close()


def test_a_barrier_that_does_not_arrive_is_not_waited_for_on_every_call(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    # The git folder is a symlink to one outside the tree: the watch does not
    # follow it, so the barrier made in it is never seen.
    (repo / ".git").rename(tmp_path / "elsewhere.git")
    (repo / ".git").symlink_to(tmp_path / "elsewhere.git")
    tracker = Tracker(max_worktrees=4, max_watches=1000, barrier_timeout_s=0.2)
    try:
        first = tracker.prepare(repo)
        assert first is not None and first.paths is None and not first.quiet
        assert tracker.refused == 1 and tracker.worktrees() == []
        assert tracker.prepare(repo) is None  # full scans, no watch, no wait
        assert tracker.armed == 1
    finally:
        tracker.close()
