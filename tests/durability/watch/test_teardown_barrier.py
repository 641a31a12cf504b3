"""Ending a watch of a plain git worktree: the final capture scans the whole
tree instead of waiting for an event barrier the unscheduled watch can never
see (it waited until the barrier's timeout, 5 s, on every unwatch with a
change pending: every engine attempt's end on git)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.config import Settings
from durability.store import AttemptKey, Store
from durability.watch.changed import ChangedPaths
from durability.watch.manager import WatchManager
from durability.watch.watch import WatchSpec
from tests.helpers import make_git_repo, store_git, wait_for


def test_the_final_capture_of_an_ended_git_watch_waits_for_no_barrier(
        tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    grepo = make_git_repo(tmp_path / "g").resolve()
    store = Store(settings.database)
    capturer = Capturer(settings=settings, store=lambda: store)
    seen: list[CaptureRequest] = []

    def capture(request: CaptureRequest) -> Outcome:
        seen.append(request)
        return capturer.capture([request], lock_timeout_s=60)[0]

    waits: list[float] = []
    real_wait = ChangedPaths._wait_barrier

    def counted(self: ChangedPaths, timeout_s: float) -> Any:
        waits.append(timeout_s)
        return real_wait(self, timeout_s)

    monkeypatch.setattr(ChangedPaths, "_wait_barrier", counted)
    manager = WatchManager(capture=capture, settings=settings, store=lambda: store)
    try:
        # A first settle capture (after it the watch knows what changed, and
        # a capture would wait for a barrier), then a change the watch ends
        # on long before its 2 s settle: only the final capture takes it.
        watch = manager.add(WatchSpec(grepo, AttemptKey("run-t", "n"), settle_ms=2_000))
        (grepo / "first.txt").write_text("settled\n")
        wait_for(lambda: watch.captures >= 1)
        before = len(waits)
        (grepo / "late.txt").write_text("written just before the watch ends\n")
        wait_for(lambda: watch.debouncer.events >= 2)
        _spec, final = manager.remove(grepo)
    finally:
        manager.close(final=False)
    assert final is not None and final.ok and final.commit_id is not None
    assert waits[before:] == [], "the final capture waited for a barrier"
    assert seen[-1].changed_paths is None  # a full scan: nothing can be missed
    tree = store_git(grepo, "ls-tree", "-r", "--name-only", final.commit_id).stdout.split()
    assert "late.txt" in tree
    store.close()
