"""Hook captures informed by the service's internal watches (issue 12): the
quiet answer for a call that changed nothing, changed paths only for the git
backend, and every way back to a full scan (eviction, overflow, limits).

Everything runs for real: the installed hook as a subprocess, the service as a
subprocess (or in this process where a test must reach inside), jj and git."""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.service.server import Service
from durability.store import Store
from tests.durability.service.informedkit import make_worktree
from tests.helpers import (
    ServiceProcess,
    checkpoints,
    cli,
    hook_payload,
    jj,
    jj_at,
    make_git_repo,
    make_jj_repo,
    ping,
    start_service,
    state_database,
)

RUN = "sess-informed"


@pytest.fixture(params=["git", "jj"])
def worktree(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return make_worktree(request.param, tmp_path / "wt")


def _start(tmp_path: Path, **env: str) -> ServiceProcess:
    return start_service(tmp_path, env={**os.environ, **env})


_calls = iter(range(1, 1_000_000))


def _hook(worktree: Path, run: str = RUN) -> None:
    payload = hook_payload(worktree, session_id=run, tool_use_id=f"toolu_{next(_calls)}")
    done = cli("snapshot-hook", input=json.dumps(payload))
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def _checkpoints(run: str = RUN) -> list[Any]:
    with Store(state_database()) as store:
        return store.checkpoints(run)


def _gaps(run: str = RUN) -> list[Any]:
    with Store(state_database()) as store:
        return store.gaps(run)


def _stats(svc: ServiceProcess) -> dict[str, int]:
    answer = ping(svc.socket_path)
    assert answer is not None
    stats: dict[str, int] = answer["informed"]
    return stats


def _shell(worktree: Path, command: str) -> None:
    """A change made the way an agent's Bash tool makes it."""
    subprocess.run(["sh", "-c", command], cwd=worktree, check=True, timeout=30)


def _files(worktree: Path, commit_id: str) -> dict[str, bytes]:
    """The files of a checkpoint (both backends here keep commits in the
    worktree's git repository: jj repositories are colocated)."""
    import pygit2

    repo = checkpoints(worktree)
    found: dict[str, bytes] = {}

    def walk(tree: Any, prefix: str) -> None:
        for entry in tree:
            if entry.type_str == "tree":
                walk(repo[entry.id], f"{prefix}{entry.name}/")
            else:
                found[prefix + entry.name] = repo[entry.id].data

    walk(repo[commit_id].peel(pygit2.Commit).tree, "")
    return found


# -- the quiet answer, and what must never be answered quietly ----------------


def test_a_call_that_changed_nothing_is_answered_quietly_and_a_shell_change_is_captured(
    worktree: Path, tmp_path: Path
) -> None:
    svc = _start(tmp_path)
    try:
        _hook(worktree)  # first sight: a full capture, and the watch is armed
        first = _stats(svc)
        assert (first["full"], first["quiet"], first["worktrees"]) == (1, 0, 1)
        _hook(worktree)  # nothing changed
        assert _stats(svc)["quiet"] == 1
        [only] = _checkpoints()
        _shell(worktree, "printf 'from the shell\\n' > src/b.txt && rm src/a.txt")
        _hook(worktree)
        after = _stats(svc)
    finally:
        svc.stop()
    assert after["quiet"] == 1  # the shell's change was not answered quietly
    # Captured, by its own jj run or from one the service took once the shell was done.
    assert after["informed"] + after["full"] + after["from_snapshot"] == 2
    one, two = _checkpoints()
    assert one.commit_id == only.commit_id
    files = _files(worktree, two.commit_id)
    assert files["src/b.txt"] == b"from the shell\n" and "src/a.txt" not in files


def test_ignored_files_and_the_captures_own_writes_keep_a_call_quiet(
    worktree: Path, tmp_path: Path
) -> None:
    svc = _start(tmp_path)
    try:
        _hook(worktree)
        for _ in range(3):
            _shell(worktree, "mkdir -p build/out && echo obj > build/out/x.o")  # ignored
            _hook(worktree)
        stats = _stats(svc)
    finally:
        svc.stop()
    assert (stats["full"], stats["quiet"]) == (1, 3)
    assert len(_checkpoints()) == 1


def test_a_write_just_before_each_call_is_in_its_checkpoint(
    worktree: Path, tmp_path: Path
) -> None:
    """The barrier: the event of a write that finished before the call is
    always in before the quiet check, however soon the call follows."""
    svc = _start(tmp_path)
    try:
        _hook(worktree)
        for i in range(6):
            (worktree / "src" / "a.txt").write_text(f"version {i}\n")
            _hook(worktree)
        stats = _stats(svc)
    finally:
        svc.stop()
    checkpoints = _checkpoints()
    assert len(checkpoints) == 7
    for i, cp in enumerate(checkpoints[1:]):
        assert _files(worktree, cp.commit_id)["src/a.txt"] == f"version {i}\n".encode()
    assert stats["quiet"] == 0
    if not (worktree / ".jj").exists():
        assert stats["informed"] == 6  # git: the changed path only, never a full scan


# -- falling back to a full scan -----------------------------------------------


def test_an_evicted_worktree_is_scanned_whole_when_it_comes_back(tmp_path: Path) -> None:
    one, two = make_git_repo(tmp_path / "one"), make_git_repo(tmp_path / "two")
    svc = _start(tmp_path, DURABILITY_INFORMED_WORKTREES="1")
    try:
        _hook(one, "run-one")
        _hook(one, "run-one")
        _hook(two, "run-two")  # the only slot goes to two: one is no longer watched
        _shell(one, "echo unseen > new.txt")  # no watch sees this
        _hook(one, "run-one")
        stats = _stats(svc)
    finally:
        svc.stop()
    assert stats["evicted"] >= 1 and stats["worktrees"] == 1
    assert stats["quiet"] == 1  # only the second call, before the eviction
    _first, second = _checkpoints("run-one")
    assert _files(one, second.commit_id)["new.txt"] == b"unseen\n"


def test_a_tree_over_the_watch_budget_is_never_answered_quietly(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "wide")
    for i in range(5):
        (repo / f"d{i}").mkdir()
    svc = _start(tmp_path, DURABILITY_INFORMED_WATCHES="3")
    try:
        for _ in range(3):
            _hook(repo)
        stats = _stats(svc)
    finally:
        svc.stop()
    assert (stats["quiet"], stats["informed"], stats["full"]) == (0, 0, 3)
    assert stats["refused"] == 1 and stats["worktrees"] == 0


def test_no_internal_watch_when_turned_off(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "off")
    svc = _start(tmp_path, DURABILITY_INFORMED_WORKTREES="0")
    try:
        _hook(repo)
        _hook(repo)
        stats = _stats(svc)
    finally:
        svc.stop()
    assert (stats["quiet"], stats["full"], stats["armed"]) == (0, 2, 0)


def _capture_inprocess(svc: Service, worktree: Path) -> Callable[[], Any]:
    from durability.capture.capturer import CaptureRequest
    from durability.store import AttemptKey

    assert svc.coalescer is not None

    def capture() -> Any:
        request = CaptureRequest(key=AttemptKey(RUN, "n", 0, 1), worktree=worktree.resolve(),
                                 source="hook", request_id=f"req-{next(_calls)}")
        assert svc.coalescer is not None
        return svc.coalescer.submit(request).result(60)

    return capture


def test_a_queue_overflow_sends_the_next_capture_to_a_full_scan(
    worktree: Path, settings: Settings
) -> None:
    with Service(settings) as svc:
        assert svc.informed is not None
        capture = _capture_inprocess(svc, worktree)
        first = capture()
        capture()
        assert svc.informed.quiet == 1
        # How watchdog reports IN_Q_OVERFLOW: only in its log.
        logging.getLogger("watchdog.observers.inotify_c").warning(
            "Inotify queue overflowed; filesystem events were lost")
        again = capture()
        assert (svc.informed.quiet, svc.informed.full) == (1, 2)
        assert again.ok and again.commit_id == first.commit_id and again.deduped
        capture()  # the watch still works after the overflow
        assert svc.informed.quiet == 2


@pytest.mark.slow
def test_rapid_write_then_capture_never_gets_a_stale_answer(
    worktree: Path, settings: Settings
) -> None:
    """No process start between the write and the capture here: only the
    event barrier stands between the write's event and a quiet answer."""
    with Service(settings) as svc:
        assert svc.informed is not None
        capture = _capture_inprocess(svc, worktree)
        capture()
        target = worktree / "src" / "a.txt"
        for i in range(15):
            target.write_text(f"rapid {i}\n")
            outcome = capture()
            assert outcome.ok
            assert _files(worktree, outcome.commit_id)["src/a.txt"] == f"rapid {i}\n".encode()
            assert capture().commit_id == outcome.commit_id  # and then quiet
        assert svc.informed.quiet == 15


def test_a_jj_command_that_moves_the_working_copy_commit_is_not_answered_quietly(
    tmp_path: Path
) -> None:
    """``jj describe`` rewrites @ without touching a file: no file event, yet
    a capture would name a new commit, so jj must answer."""
    repo = make_jj_repo(tmp_path / "jjwt")
    (repo / "f.txt").write_text("f\n")
    svc = _start(tmp_path)
    try:
        _hook(repo)
        _hook(repo)
        assert _stats(svc)["quiet"] == 1
        jj(repo, "describe", "-m", "described elsewhere")
        _hook(repo)
        assert _stats(svc)["quiet"] == 1
        _hook(repo)  # and quiet again once jj has answered
        stats = _stats(svc)
    finally:
        svc.stop()
    assert stats["quiet"] == 2
    first, second = _checkpoints()
    assert second.commit_id != first.commit_id
    assert second.commit_id == jj_at(repo)


def test_a_change_to_the_repositorys_own_ignore_rules_sends_the_next_call_to_a_capture(
    worktree: Path, tmp_path: Path
) -> None:
    """``.git/info/exclude`` lives where events never count, yet changes what
    a capture takes."""
    exclude = worktree / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("*.log\n")
    (worktree / "kept.log").write_text("was ignored\n")
    svc = _start(tmp_path)
    try:
        _hook(worktree)
        _hook(worktree)
        assert _stats(svc)["quiet"] == 1
        exclude.write_text("# nothing excluded now\n")
        _hook(worktree)
        stats = _stats(svc)
    finally:
        svc.stop()
    assert stats["quiet"] == 1
    first, second = _checkpoints()
    assert "kept.log" not in _files(worktree, first.commit_id)
    assert _files(worktree, second.commit_id)["kept.log"] == b"was ignored\n"


def test_a_warmed_worktree_is_watched_and_scanned_before_its_first_request(
    worktree: Path, settings: Settings, tmp_path: Path
) -> None:
    """``Service.warm`` (what ``serve --warm`` runs for an autostarting
    hook's worktree): the first request after it is informed on git, and
    its checkpoint holds a change made after the warm; a path that is not a
    worktree's root, and a worktree a request already armed, are left alone."""
    root = worktree.resolve()
    with Service(settings) as svc:
        assert svc.informed is not None
        svc._warm_one(root / "src")  # inside the worktree, not its root: nothing
        assert svc.informed.tracker.worktrees() == []
        svc._warm_one(root)
        assert list(svc.informed.tracker.worktrees()) == [root]
        assert not svc.informed.warm(root)  # armed already: nothing more
        (root / "src" / "a.txt").write_text("after the warm\n")
        outcome = _capture_inprocess(svc, root)()
        assert outcome.ok
        assert _files(root, outcome.commit_id)["src/a.txt"] == b"after the warm\n"
        if (root / ".jj").is_dir():
            # jj reads its whole tree anyway: the warm armed the watch, no
            # scan.  The request then takes a jj run of its own, or is
            # recorded from the snapshot the settle thread took after the
            # write (decisions 0047, 0058) when that snapshot came first:
            # either keeps the write; which one wins is the machine's load.
            stats = svc.informed
            assert stats.informed == 0
            assert (stats.full, stats.from_snapshot) in ((1, 0), (0, 1)), stats.stats()
            assert stats.ahead >= stats.from_snapshot
        else:
            assert (svc.informed.informed, svc.informed.full) == (1, 0)
