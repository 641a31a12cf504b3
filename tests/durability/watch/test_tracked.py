"""The service's internal watches (``watch/tracked.py``) on their own: real
inotify through watchdog, real repositories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.watch.inotify import INTERNAL_KEPT, internal_observer, watched_folders
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
        # Each: its root, .git and .git/info; nothing deeper in .git.
        assert folders == 2 * 3
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


# -- the internal watch stays out of .git and .jj (issue 25) --------------------


def _watched(tracker: Tracker, repo: Path) -> set[str]:
    tracked = tracker._tracked[repo]
    found = watched_folders(tracker._observer, tracked.observed)
    assert found is not None, "this watchdog does not say what it watches"
    return {os.path.relpath(os.fsdecode(p), repo) for p in found}


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_the_internal_watch_holds_no_watch_inside_git_or_jj_but_the_kept_folders(
        tmp_path: Path, kind: str) -> None:
    repo = make_jj_repo(tmp_path / "repo") if kind == "jj" else make_git_repo(tmp_path / "repo")
    (repo / "src" / "deep").mkdir(parents=True)
    (repo / "vendored" / ".git" / "objects").mkdir(parents=True)  # a nested repository's store
    tracker = Tracker()
    try:
        tracker.prepare(repo)
        watched = _watched(tracker, repo)
        internal = {w for w in watched if ".git" in w.split("/") or ".jj" in w.split("/")}
        assert internal == {k for k in INTERNAL_KEPT if (repo / k).is_dir()}
        assert {".", "src", "src/deep", "vendored"} <= watched
        # A folder made later inside .git is not watched either; one in the tree is.
        (repo / ".git" / "refs" / "made-later").mkdir()
        (repo / "src" / "new").mkdir()
        (repo / "src" / "new" / "b.txt").write_text("b\n")
        informed = tracker.prepare(repo)  # behind a barrier: every event so far is in
        assert informed is not None and not informed.quiet
        watched = _watched(tracker, repo)
        assert "src/new" in watched and ".git/refs/made-later" not in watched
        if kind == "git":
            assert informed.paths is not None and "src/new/b.txt" in informed.paths
    finally:
        tracker.close()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_writes_inside_git_and_jj_alone_leave_the_tree_quiet(tmp_path: Path, kind: str) -> None:
    repo = make_jj_repo(tmp_path / "repo") if kind == "jj" else make_git_repo(tmp_path / "repo")
    tracker = Tracker()
    try:
        tracker.prepare(repo)
        tracker.prepare(repo)
        (repo / ".git" / "objects" / "ab").mkdir(exist_ok=True)
        (repo / ".git" / "objects" / "ab" / "cd").write_bytes(b"x")
        (repo / ".git" / "HEAD.lock").write_text("x\n")
        (repo / ".git" / "HEAD.lock").unlink()
        informed = tracker.prepare(repo)
        assert informed is not None and informed.quiet
        # ... and a settings file there still sends the next capture to a full scan.
        with (repo / ".git" / "info" / "exclude").open("a") as f:
            f.write("*.log\n")
        informed = tracker.prepare(repo)
        assert informed is not None and not informed.quiet and informed.paths is None
    finally:
        tracker.close()


def test_the_narrowed_observer_is_the_one_in_use() -> None:
    # This watchdog's inotify observer is the one internal_observer knows how
    # to narrow: were it not, the watch would silently watch everything again.
    observer = internal_observer()
    assert type(observer).__name__ == "PrunedObserver"
    observer.start()
    observer.stop()
    observer.join(10)


def test_a_git_folder_made_again_is_watched_where_it_must_be(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    tracker = Tracker()
    try:
        tracker.prepare(repo)
        (repo / ".git").rename(tmp_path / "old.git")
        (tmp_path / "old.git").rename(repo / ".git")  # moved back in: a new watch
        (repo / "src.txt").write_text("x\n")
        tracker.prepare(repo)
        assert tracker.armed == 1  # the same watch: the folder's own event re-watched it
        watched = _watched(tracker, repo)
        assert {".git", ".git/info"} <= watched
        assert not any(w.startswith(".git/objects") for w in watched)
    finally:
        tracker.close()


def test_a_take_without_barrier_waits_for_nothing_and_leaves_late_events_to_the_next(
        tmp_path: Path) -> None:
    """The take a snapshot ahead of the hook starts from (``barrier=False``):
    no observer runs here, so a barrier would never arrive; the take returns
    at once all the same, and an event delivered after it makes the next
    take (behind its barrier in the service) not quiet."""
    from durability.watch.changed import ChangedPaths
    from durability.watch.ignore import IgnoreRules

    repo = make_jj_repo(tmp_path / "jj").resolve()
    changed = ChangedPaths(repo, IgnoreRules(repo))
    changed.add([str(repo / "a.txt")])
    first = changed.take_informed(0.5, barrier=False)
    assert not first.quiet and changed.barrier_misses == 0
    assert changed.take_informed(0.5, barrier=False).quiet
    changed.add([str(repo / "a.txt")])  # late for the take before
    assert not changed.take_informed(0.5, barrier=False).quiet
    assert changed.barrier_misses == 0
    # With the barrier and nothing to deliver it: a miss, and not quiet.
    assert not changed.take_informed(0.05).quiet
    assert changed.barrier_misses == 1
