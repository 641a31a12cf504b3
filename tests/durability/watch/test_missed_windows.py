"""Issue 12, "Missed windows on record": a watcher killed inside a settle
window leaves its window on disk; the next service or foreground watch files
exactly one ``watch-window-missed`` gap for it, then catches the tree up.
A clean stop, or a window a capture answered, files nothing.

Real parts: the installed ``durability serve`` and ``durability watch
--foreground`` killed with SIGKILL, real jj repositories, real inotify events.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.gaps.ingest import ingest_spool
from durability.ground import client
from durability.store import AttemptKey, Checkpoint, Gap, Store
from durability.store.clock import ManualTimer
from durability.watch.debounce import Debouncer
from durability.watch.window import WindowMarker, file_missed, open_markers
from tests.helpers import ServiceProcess, cli, durability_exe, jj, start_service, wait_for

RUN = "run-windows"
KEY = AttemptKey(RUN, "n", 0, 1)
# Long enough that a test sees the window open and kills its watcher inside
# it, even on a loaded machine; the watch captures once it has settled.
SETTLE_MS = 8000


def _gaps(settings: Settings) -> list[Gap]:
    with Store(settings.database) as store:
        ingest_spool(store, settings.spool_dirs)
        return store.gaps(RUN)


def _rows(settings: Settings) -> list[Checkpoint]:
    with Store(settings.database) as store:
        return store.checkpoints(RUN)


def _markers(settings: Settings) -> list[Path]:
    """The markers that hold an open window (a watch's marker stays on disk,
    answered, while the watch lives: decision 0067)."""
    return open_markers(settings.window_dir)


def _files(repo: Path, commit: str) -> set[str]:
    return set(jj(repo, "file", "list", "-r", commit).stdout.split())


def _watch(repo: Path) -> None:
    done = cli("watch", str(repo), "--run", RUN, "--node", "n", "--settle-ms", str(SETTLE_MS),
               "--max-delay-ms", str(SETTLE_MS))
    assert done.returncode == 0, done.stderr


def _answered(settings: Settings, rows: int) -> None:
    """Wait until ``rows`` checkpoints are on record and no window is open."""
    wait_for(lambda: len(_rows(settings)) >= rows and not _markers(settings), timeout=60)


def _open_window(settings: Settings, repo: Path, name: str) -> int:
    """Write a file and wait for its window's marker; the ms before the write."""
    before = time.time_ns() // 1_000_000
    (repo / name).write_text(f"{name}\n")
    wait_for(lambda: _markers(settings), timeout=60)
    return before


def _resumed(settings: Settings) -> None:
    """Wait until a started service took its watch up and captured once (its
    missed windows, if any, were filed before that) and no window is open."""
    def done() -> bool:
        answer = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
        watches = answer.get("watches") or []
        return bool(watches) and watches[0]["captures"] >= 1 and not _markers(settings)

    wait_for(done, timeout=60)


def _kill(service: ServiceProcess) -> None:
    service.proc.send_signal(signal.SIGKILL)
    service.proc.wait(30)


@pytest.mark.timing
def test_a_service_killed_inside_a_window_files_one_gap_then_catches_up(
    tmp_path: Path, repo: Path, settings: Settings
) -> None:
    service = start_service(tmp_path)
    try:
        _watch(repo)
        _answered(settings, 1)  # the baseline capture answered its own window
        before = _open_window(settings, repo, "unsettled.txt")
        _kill(service)
        killed_at = time.time_ns() // 1_000_000
    finally:
        service.kill()
    assert len(_rows(settings)) == 1  # the window's capture never ran
    assert len(_markers(settings)) == 1
    assert _gaps(settings) == []

    service = start_service(tmp_path)
    try:
        _resumed(settings)  # the gap is filed at start, before the watch is taken up
        (gap,) = _gaps(settings)
        assert (gap.reason, gap.source, gap.worktree) == ("watch-window-missed", "watch",
                                                          str(repo.resolve()))
        assert (gap.node_id, gap.iteration, gap.attempt) == ("n", 0, 1)
        assert gap.request_id.startswith("watch-window-")
        assert before <= gap.ts_ms <= killed_at  # dated when the window opened
        assert gap.detail is not None and f"opened_at_ms={gap.ts_ms}" in gap.detail
        assert "service start" in gap.detail
        found = re.search(r"found_at_ms=(\d+)", gap.detail)
        assert found is not None
        found_at = int(found[1])
        catch_up = _rows(settings)[-1]
        assert catch_up.label == "watch catch-up"
        assert "unsettled.txt" in _files(repo, catch_up.commit_id)
        assert killed_at <= found_at <= catch_up.created_at_ms  # filed, then caught up
    finally:
        assert service.stop() == 0
    again = start_service(tmp_path)  # a clean stop in between: nothing more
    try:
        _resumed(settings)
    finally:
        assert again.stop() == 0
    assert [g.reason for g in _gaps(settings)] == ["watch-window-missed"]


@pytest.mark.slow
def test_a_clean_stop_inside_a_window_files_no_gap(
    tmp_path: Path, repo: Path, settings: Settings
) -> None:
    service = start_service(tmp_path)
    try:
        _watch(repo)
        _answered(settings, 1)
        _open_window(settings, repo, "at-stop.txt")
    finally:
        assert service.stop() == 0  # SIGTERM: the final capture answers the window
    assert _markers(settings) == []
    assert "at-stop.txt" in _files(repo, _rows(settings)[-1].commit_id)
    again = start_service(tmp_path)
    try:
        _resumed(settings)
        assert "watch catch-up" not in {r.label for r in _rows(settings)}
    finally:
        assert again.stop() == 0
    assert _gaps(settings) == []


@pytest.mark.slow
def test_a_kill_after_the_window_was_answered_files_no_gap(
    tmp_path: Path, repo: Path, settings: Settings
) -> None:
    service = start_service(tmp_path)
    try:
        _watch(repo)
        _answered(settings, 1)
        _open_window(settings, repo, "settled.txt")
        _answered(settings, 2)  # the settle capture is on record, its marker gone
        _kill(service)
    finally:
        service.kill()
    again = start_service(tmp_path)
    try:
        _resumed(settings)
        assert "watch catch-up" not in {r.label for r in _rows(settings)}
    finally:
        assert again.stop() == 0
    assert _gaps(settings) == []


def _foreground(repo: Path, tmp_path: Path) -> subprocess.Popen[bytes]:
    log = (tmp_path / f"fg-{time.monotonic_ns()}.log").open("wb")
    with log:
        return subprocess.Popen(
            [durability_exe(), "watch", str(repo), "--run", RUN, "--node", "n", "--settle-ms",
             str(SETTLE_MS), "--max-delay-ms", str(SETTLE_MS), "--foreground", "--json"],
            stdout=subprocess.DEVNULL, stderr=log)


@pytest.mark.timing
def test_a_killed_foreground_watch_is_filed_by_the_next_one(
    tmp_path: Path, repo: Path, settings: Settings
) -> None:
    first = _foreground(repo, tmp_path)
    try:
        _answered(settings, 1)
        _open_window(settings, repo, "fg.txt")
        first.kill()
        first.wait(30)
        # A live watcher's window is never filed: here the second watch's own.
        second = _foreground(repo, tmp_path)
        try:
            _answered(settings, 2)
            catch_up = _rows(settings)[-1]
            assert catch_up.label == "watch catch-up"
            assert "fg.txt" in _files(repo, catch_up.commit_id)
            _open_window(settings, repo, "live.txt")
            assert file_missed(settings, found_by="test") == []
        finally:
            second.send_signal(signal.SIGINT)
            assert second.wait(60) == 0
    finally:
        for proc in (first,):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [g.reason for g in _gaps(settings)] == ["watch-window-missed"]
    assert "foreground watch start" in (_gaps(settings)[0].detail or "")


# -- the marker on its own ---------------------------------------------------


def test_a_marker_is_filed_only_once_its_owner_let_go(tmp_path: Path, settings: Settings) -> None:
    worktree = tmp_path / "wt"
    worktree.mkdir()
    marker = WindowMarker(settings.window_dir, worktree, KEY)
    marker.mark(1_000)
    marker.mark(2_000)  # a later window start replaces the earlier marker
    assert len(_markers(settings)) == 1
    assert file_missed(settings, found_by="test") == []  # locked: its watcher is alive
    marker.release()
    marker.mark(3_000)  # released: a late event opens nothing
    (missed,) = file_missed(settings, found_by="test", worktree=worktree)
    assert (missed.key, missed.worktree, missed.opened_at_ms) == (KEY, worktree, 2_000)
    assert _markers(settings) == []
    assert file_missed(settings, found_by="test") == []
    (gap,) = _gaps(settings)
    assert (gap.ts_ms, gap.request_id) == (2_000, missed.request_id)


def test_a_cleared_marker_leaves_nothing(tmp_path: Path, settings: Settings) -> None:
    marker = WindowMarker(settings.window_dir, tmp_path, KEY)
    marker.mark(1_000)
    marker.clear()
    marker.release()
    assert _markers(settings) == []
    assert os.listdir(settings.window_dir) == []  # the answered marker goes with its watch
    assert file_missed(settings, found_by="test") == []
    assert _gaps(settings) == []


def _die_after(settings: Settings, worktree: Path, steps: str) -> Path:
    """A watcher process that runs ``steps`` on its marker (``m1000`` marks
    a window opened at 1000 ms, ``c`` clears) and dies without a word (no
    release): the marker it leaves."""
    lines = ["import os", "from pathlib import Path",
             "from durability.store import AttemptKey",
             "from durability.watch.window import WindowMarker",
             f"m = WindowMarker(Path({str(settings.window_dir)!r}), Path({str(worktree)!r}), "
             f"AttemptKey({KEY.run_id!r}, {KEY.node_id!r}, {KEY.iteration}, {KEY.attempt}))"]
    for step in steps.split():
        lines.append(f"m.mark({int(step[1:])})" if step[0] == "m" else "m.clear()")
    lines.append("os._exit(0)")
    subprocess.run([sys.executable, "-c", "\n".join(lines)], check=True)
    (path,) = settings.window_dir.glob("*.window")
    return path


def test_a_watch_keeps_one_marker_across_its_windows(tmp_path: Path,
                                                      settings: Settings) -> None:
    # Decision 0067: the first window makes the file, later ones rewrite it.
    marker = WindowMarker(settings.window_dir, tmp_path, KEY)
    marker.mark(1_000)
    (path,) = settings.window_dir.glob("*.window")
    inode = path.stat().st_ino
    for i in range(5):
        marker.clear()
        assert _markers(settings) == []
        marker.mark(2_000 + i)
        assert _markers(settings) == [path]
    assert [p.stat().st_ino for p in settings.window_dir.iterdir()] == [inode]
    marker.release()  # open: left for the next start
    (missed,) = file_missed(settings, found_by="test")
    assert missed.opened_at_ms == 2_004
    assert os.listdir(settings.window_dir) == []


def test_a_dead_watcher_whose_window_was_answered_files_nothing(
        tmp_path: Path, settings: Settings) -> None:
    path = _die_after(settings, tmp_path, "m1000 c m2000 c")
    assert _markers(settings) == []
    assert file_missed(settings, found_by="test") == []
    assert not path.exists()
    assert _gaps(settings) == []
    path = _die_after(settings, tmp_path, "m1000 c m3000")
    (missed,) = file_missed(settings, found_by="test")
    assert missed.opened_at_ms == 3_000
    assert not path.exists()


def _tear_newest(path: Path) -> None:
    """A power cut in the middle of the last rewrite: its slot's record is
    half old, half new (the two slots are the file's halves)."""
    data = bytearray(path.read_bytes())
    half = len(data) // 2
    seqs = [int.from_bytes(data[at + 4:at + 12], "little") for at in (0, half)]
    newest = 0 if seqs[0] > seqs[1] else half
    data[newest + 30] ^= 0xFF  # inside the record: its checksum no longer holds
    path.write_bytes(bytes(data))


def test_a_torn_rewrite_leaves_the_state_before_it(tmp_path: Path,
                                                   settings: Settings) -> None:
    # An answer torn: the window before it still reads open, and is filed
    # (a gap for a window whose answer was being written errs toward a gap).
    path = _die_after(settings, tmp_path, "m1000 c m4000 c")
    _tear_newest(path)
    (missed,) = file_missed(settings, found_by="test")
    assert missed.opened_at_ms == 4_000
    # A window's opening torn: the answered state before it stands, as if
    # the watcher had died before the window's marker was written.
    path = _die_after(settings, tmp_path, "m1000 c m5000")
    _tear_newest(path)
    assert file_missed(settings, found_by="test") == []
    assert not path.exists()


def test_a_marker_an_older_version_wrote_is_still_filed(tmp_path: Path,
                                                        settings: Settings) -> None:
    settings.window_dir.mkdir(parents=True, mode=0o700)
    record = {"v": 1, "run_id": KEY.run_id, "node_id": KEY.node_id, "iteration": KEY.iteration,
              "attempt": KEY.attempt, "worktree": str(tmp_path), "opened_at_ms": 7_000,
              "pid": 1, "token": "ab" * 12}
    (settings.window_dir / f"{'0' * 32}.{'ab' * 12}.window").write_text(json.dumps(record))
    assert len(_markers(settings)) == 1
    (missed,) = file_missed(settings, found_by="test")
    assert (missed.key, missed.opened_at_ms, missed.request_id) == (
        KEY, 7_000, f"watch-window-{'ab' * 12}")


def test_a_record_too_long_for_its_slot_gets_a_new_marker(tmp_path: Path,
                                                          settings: Settings) -> None:
    marker = WindowMarker(settings.window_dir, tmp_path, KEY)
    marker.mark(1_000)
    marker.clear()
    (first,) = settings.window_dir.glob("*.window")
    long_key = AttemptKey(KEY.run_id, "n" * 6000, 0, 1)
    marker.rekey(long_key)
    marker.mark(2_000)
    (second,) = settings.window_dir.glob("*.window")
    assert second != first
    marker.release()
    (missed,) = file_missed(settings, found_by="test")
    assert (missed.key, missed.opened_at_ms) == (long_key, 2_000)


def test_a_marker_of_another_worktree_is_left_alone(tmp_path: Path, settings: Settings) -> None:
    marker = WindowMarker(settings.window_dir, tmp_path / "a", KEY)
    marker.mark(1_000)
    marker.release()
    assert file_missed(settings, found_by="test", worktree=tmp_path / "b") == []
    assert len(_markers(settings)) == 1
    found: list[Any] = file_missed(settings, found_by="test")
    assert [m.worktree for m in found] == [tmp_path / "a"]


def test_a_gap_that_cannot_be_filed_keeps_its_marker(tmp_path: Path, settings: Settings) -> None:
    from durability.watch.window import claim_missed

    marker = WindowMarker(settings.window_dir, tmp_path, KEY)
    marker.mark(1_000)
    marker.release()
    assert claim_missed(settings.window_dir, lambda m: False) == []
    assert len(_markers(settings)) == 1
    assert len(claim_missed(settings.window_dir, lambda m: True)) == 1
    assert _markers(settings) == []
    assert os.listdir(settings.window_dir) == []  # no temporary file left behind


def test_a_service_catches_up_a_worktree_it_does_not_watch(
    tmp_path: Path, repo: Path, settings: Settings
) -> None:
    # A window left by a watcher of a worktree no recorded watch covers (a
    # foreground watch that died): the service files it and captures once.
    worktree = repo.resolve()
    marker = WindowMarker(settings.window_dir, worktree, KEY)
    marker.mark(5_000)
    marker.release()
    (repo / "left.txt").write_text("left\n")
    service = start_service(tmp_path)
    try:
        wait_for(lambda: _rows(settings), timeout=60)
    finally:
        assert service.stop() == 0
    (row,) = _rows(settings)
    assert (row.label, row.source) == ("watch catch-up", "watch")
    assert "left.txt" in _files(repo, row.commit_id)
    assert [(g.reason, g.ts_ms) for g in _gaps(settings)] == [("watch-window-missed", 5_000)]
    assert _markers(settings) == []


# -- the debouncer's window: one mark per window, cleared when answered -----


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def mark(self, opened_at_ms: int) -> None:
        self.calls.append(("mark", opened_at_ms))

    def clear(self) -> None:
        self.calls.append(("clear", 0))


def _debouncer(window: _Recorder, fire: Any, timer: ManualTimer) -> Debouncer:
    d = Debouncer(fire, settle_s=0.05, max_delay_s=10, name="test-window", window=window,
                  timer=timer)
    d.start()
    timer.until_waiting()
    return d


def test_a_burst_marks_its_window_once_and_its_capture_clears_it() -> None:
    window, fired = _Recorder(), threading.Event()

    def fire(reason: str) -> bool:
        fired.set()
        return True

    timer = ManualTimer()
    d = _debouncer(window, fire, timer)
    try:
        for _ in range(100):
            d.touch()
        timer.advance(0.05)
        timer.until_waiting()  # captured, answered, and idle again
        assert fired.is_set()
    finally:
        d.stop(final=False)
    assert [c[0] for c in window.calls] == ["mark", "clear"]


def test_events_during_a_capture_open_the_next_window() -> None:
    window, started, go = _Recorder(), threading.Event(), threading.Event()
    answers = iter([True, True])

    def fire(reason: str) -> bool:
        started.set()
        assert go.wait(10)
        return next(answers)

    timer = ManualTimer()
    d = _debouncer(window, fire, timer)
    try:
        d.touch()
        timer.advance(0.05)
        assert started.wait(10)
        started.clear()
        timer.advance(0.01)
        d.touch()  # during the capture: not answered by it
        go.set()
        timer.until_waiting()  # the first capture answered, the next window due
        timer.advance(0.05)
        assert started.wait(10)
        timer.until_waiting()
    finally:
        d.stop(final=False)
    (m1, t1), (m2, t2), (c, _) = window.calls
    assert (m1, m2, c) == ("mark", "mark", "clear")
    assert t2 > t1  # the later window starts at its own first event


def test_a_capture_not_on_record_keeps_the_window() -> None:
    window, fired = _Recorder(), threading.Event()

    def fire(reason: str) -> bool:
        fired.set()
        return False  # failed, and no gap could be filed

    timer = ManualTimer()
    d = _debouncer(window, fire, timer)
    try:
        d.touch()
        timer.advance(0.05)
        timer.until_waiting()  # the capture came back unanswered: idle again
        assert fired.is_set()
        timer.advance(10)  # nothing clears it later either
        timer.until_waiting()
    finally:
        d.stop(final=False)
    assert window.calls == [("mark", window.calls[0][1])]


@pytest.mark.slow
def test_unwatch_without_a_service_files_the_dead_services_window(
    tmp_path: Path, repo: Path, settings: Settings
) -> None:
    service = start_service(tmp_path)
    try:
        _watch(repo)
        _answered(settings, 1)
        _open_window(settings, repo, "orphan.txt")
        _kill(service)
    finally:
        service.kill()
    done = cli("unwatch", str(repo))
    assert done.returncode == 0, done.stderr
    assert _markers(settings) == []
    (gap,) = _gaps(settings)
    assert gap.reason == "watch-window-missed" and "by unwatch" in (gap.detail or "")
    final = _rows(settings)[-1]
    assert final.label == "watch final" and "orphan.txt" in _files(repo, final.commit_id)
    again = start_service(tmp_path)  # nothing left to file, no watch to resume
    again.stop()
    assert len(_gaps(settings)) == 1


def test_a_temporary_marker_left_by_a_dead_writer_is_removed(settings: Settings) -> None:
    settings.window_dir.mkdir(parents=True, mode=0o700)
    stale, fresh = settings.window_dir / ".old.tmp", settings.window_dir / ".new.tmp"
    stale.write_text("{")
    fresh.write_text("{")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    assert file_missed(settings, found_by="test") == []
    assert sorted(os.listdir(settings.window_dir)) == [".new.tmp"]  # a live writer's, maybe
