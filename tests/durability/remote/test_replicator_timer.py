"""The replicator's deadlines on a manual timer (``durability.store.clock.ManualTimer``):
a burst is pushed once it pauses for ``QUIET_S`` or ``MAX_DEFER_S`` after it
began, work nobody poked about is found by the look every ``POLL_S``, a failed
push is retried with a doubling delay, and a checkpoint still unpushed after
the bound is one replication-failed gap.  Real git repositories, bare file://
remotes, the real store; only time is moved by the test."""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from durability.config import Settings
from durability.gaps.ingest import ingest_spool
from durability.remote import replicator
from durability.remote.replicator import Replicator
from durability.store import Gap, Store
from durability.store.clock import ManualTimer
from durability.store.remote_rows import Remotes
from tests.durability.remote.remotekit import (
    KEY,
    add_remote,
    bare_remote,
    capture,
    manifest_commits,
    pushes,
    quick_states,
)
from tests.helpers import git, make_git_repo, wait_for, write_script

#: A binary fraction: steps of it add up to the deadlines exactly.
STEP = 0.125


@contextmanager
def _running(settings: Settings, timer: ManualTimer) -> Iterator[Replicator]:
    """The replicator's thread, as the service runs it, on ``timer``."""
    with Store(settings.database) as store:
        rep = Replicator(settings, lambda: store, os.environ, timer=timer)
        rep.start()
        try:
            timer.until_waiting(timeout_s=60)  # its first idle wait
            yield rep
        finally:
            rep.stop()


def _step(timer: ManualTimer, seconds: float) -> None:
    """Move time, and wait until the replicator has done what it decides."""
    timer.advance(seconds)
    timer.until_waiting(timeout_s=60)


def _gaps(settings: Settings) -> list[Gap]:
    with Store(settings.database) as store:
        ingest_spool(store, settings.spool_dir)
        return store.gaps(KEY.run_id)


def test_a_poked_burst_is_pushed_once_it_pauses_for_the_quiet(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    commits = [capture(repo, f"call {i}") for i in range(2)]
    timer = ManualTimer()
    with _running(Settings.from_env(), timer) as rep:
        rep.poke()
        timer.until_waiting()
        _step(timer, replicator.QUIET_S - STEP / 2)
        assert rep.pushes == 0
        commits.append(capture(repo, "one more in the burst"))
        rep.poke()  # the quiet starts again
        timer.until_waiting()
        _step(timer, replicator.QUIET_S - STEP / 2)
        assert (rep.pushes, pushes(remote)) == (0, [])
        _step(timer, STEP)
        assert rep.pushes == 1
    assert len(pushes(remote)) == 1
    assert manifest_commits(remote) == set(commits)
    assert quick_states() == [{"backup": "pushed"}] * 3


def test_a_burst_that_goes_on_is_pushed_max_defer_after_it_began(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "the burst")
    timer = ManualTimer()
    with _running(Settings.from_env(), timer) as rep:
        steps = round(replicator.MAX_DEFER_S / STEP)
        for _ in range(steps):  # a poke every STEP (< QUIET_S): never quiet
            rep.poke()
            timer.until_waiting()
            _step(timer, STEP)
            assert rep.pushes == 0
        assert timer.monotonic() == replicator.MAX_DEFER_S
        rep.poke()  # the first poke at MAX_DEFER_S after the burst began
        timer.until_waiting(timeout_s=60)
        assert rep.pushes == 1
    assert len(pushes(remote)) == 1


def test_work_nobody_poked_about_is_found_by_the_idle_look(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    timer = ManualTimer()
    with _running(Settings.from_env(), timer) as rep:
        commit = capture(repo, "in-process, no poke")
        _step(timer, replicator.POLL_S - STEP)
        assert rep.pushes == 0
        _step(timer, STEP)
        assert rep.pushes == 1
    assert manifest_commits(remote) == {commit}


def test_a_restart_with_nothing_pending_pushes_nothing(tmp_path: Path) -> None:
    """Idle looks read the outbox only: several of them, and no push."""
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "pushed by the first")
    settings = Settings.from_env()
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() == 1
    assert len(pushes(remote)) == 1
    timer = ManualTimer()
    with _running(settings, timer) as rep:
        for _ in range(3):
            _step(timer, replicator.POLL_S)
        assert rep.pushes == 0
    assert len(pushes(remote)) == 1


def test_nothing_is_pushed_without_a_named_remote_not_even_to_origin(tmp_path: Path) -> None:
    origin = bare_remote(tmp_path / "origin.git")
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "remote", "add", "origin", origin.as_uri())
    capture(repo, "a checkpoint of a clone")
    timer = ManualTimer()
    with _running(Settings.from_env(), timer) as rep:
        rep.poke()
        timer.until_waiting()
        _step(timer, replicator.QUIET_S)  # the poked pass
        _step(timer, replicator.POLL_S)  # and an idle look
        assert rep.pushes == 0
    assert pushes(origin) == [] and quick_states() == [{}]


def test_an_unreachable_remote_is_one_gap_within_the_bound_then_pushed(tmp_path: Path) -> None:
    """The race of the back-off and the bound: however the retries fall, the
    checkpoint is exactly one gap, with a reason from the allowed set, filed
    at the first try past the bound (within one back-off of it); retries go
    on, and once the remote is there it is pushed, still one gap."""
    repo = make_git_repo(tmp_path / "repo")
    remote = tmp_path / "not-yet.git"
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "never pushed in time")
    bound_ms = 400
    settings = replace(Settings.from_env(), replication_bound_ms=bound_ms)
    (due,) = Remotes(settings.database).pending()
    timer = ManualTimer(wall_ms=due.since_ms)
    filed_at: float | None = None
    with _running(settings, timer) as rep:
        rep.poke()
        timer.until_waiting()
        while timer.monotonic() < 4.0:
            _step(timer, STEP)
            if filed_at is None and _gaps(settings):
                filed_at = timer.monotonic()
            if filed_at is None:
                assert quick_states() == [{"backup": "pending"}]
        assert filed_at is not None, "no gap past the bound"
        assert bound_ms / 1000 <= filed_at <= bound_ms / 1000 + 2 * replicator.BACKOFF_MIN_S
        gaps = _gaps(settings)
        assert len(gaps) == 1
        assert gaps[0].reason in {replicator.GAP_REASON}
        assert "backup" in (gaps[0].detail or "") and "after 0.4s" in (gaps[0].detail or "")
        assert quick_states() == [{"backup": "failed"}]
        bare_remote(remote)  # reachable now: a retry gets it there
        while rep.pushes == 0 and timer.monotonic() < 4.0 + 2 * replicator.BACKOFF_MAX_S:
            _step(timer, STEP)
        assert rep.pushes == 1
    assert quick_states() == [{"backup": "pushed"}]
    assert [g.reason for g in _gaps(settings)] == [replicator.GAP_REASON]


def test_failed_pushes_are_retried_with_a_doubling_delay(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    tries = tmp_path / "tries.log"
    write_script(remote / "hooks" / "pre-receive",
                 f"#!/bin/sh\necho try >> {tries}\ncat > /dev/null\nexit 1\n")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "refused")
    timer = ManualTimer()
    seen: list[tuple[float, int]] = []
    with _running(Settings.from_env(), timer) as rep:
        rep.poke()
        timer.until_waiting()
        _step(timer, 2 * STEP)  # past QUIET_S: the poked pass tries
        while timer.monotonic() < 8.0:
            count = len(tries.read_text().split()) if tries.exists() else 0
            if not seen or seen[-1][1] != count:
                seen.append((timer.monotonic(), count))
            _step(timer, STEP)
        assert rep.pushes == 0
    # Tried when poked, then 0.5, 1, 2 and 4 s after each failure (the
    # look every POLL_S between the last two finds the retry not yet due).
    starts = [at for at, _ in seen]
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(starts)]
    assert [n for _, n in seen] == list(range(1, len(seen) + 1))
    assert gaps == [0.5, 1.0, 2.0, 4.0]


def test_a_second_replicator_of_one_state_store_leaves_a_push_under_way_alone(
        tmp_path: Path) -> None:
    """Two services of one state folder share one outbox: while one pushes,
    the other's passes and looks push nothing (no double push, no two
    manifest commits racing for one local ref)."""
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    gate = tmp_path / "gate"
    gate.touch()
    tries = tmp_path / "tries.log"
    write_script(remote / "hooks" / "pre-receive",
                 f"#!/bin/sh\necho try >> {tries}\ncat > /dev/null\n"
                 f"while [ -e {gate} ]; do sleep 0.05; done\n")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "pushed by one of them")
    settings = Settings.from_env()
    done: list[int] = []
    with Store(settings.database) as store:
        first = Replicator(settings, lambda: store, os.environ)
        pushing = threading.Thread(target=lambda: done.append(first.run_once()), daemon=True)
        pushing.start()
        try:
            wait_for(tries.exists, timeout=60)
            timer = ManualTimer()
            with _running(settings, timer) as second:
                second.poke()
                timer.until_waiting()
                _step(timer, replicator.QUIET_S)  # its poked pass
                _step(timer, replicator.POLL_S)  # and an idle look
                assert second.run_once() == 0
                assert second.pushes == 0
        finally:
            gate.unlink(missing_ok=True)
            pushing.join(60)
            first.stop()
    assert done == [1]
    assert tries.read_text().split() == ["try"]
    assert quick_states() == [{"backup": "pushed"}]
