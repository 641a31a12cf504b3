"""Capture and record (contracts 1, 3: docs/DESIGN.md): rows, dedup, store-assigned seq,
request-id idempotency, and how each kind of failure is classified."""

from __future__ import annotations

import functools
import json
import shlex
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from durability.backends import resolve_worktree
from durability.capture.inprocess import capture_once
from durability.config import Settings
from durability.gaps import spool
from durability.ground import client
from durability.service import server
from durability.service.server import Service
from durability.store import AttemptKey, Store
from tests.helpers import (
    git,
    hook_payload,
    jj_at,
    jj_path,
    make_jj_repo,
    pid_alive,
    ping,
    run_cli,
    run_cli_json,
    start_service,
    wait_for,
    write_script,
)

RUN = "run-cap"


def _snap(repo: Path, *extra: str) -> dict[str, Any]:
    result: dict[str, Any] = run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n",
                                          *extra)
    return result


def _rows(settings: Settings, run: str = RUN) -> list[Any]:
    with Store(settings.database) as store:
        return store.checkpoints(run)


def _gaps(run: str = RUN) -> list[dict[str, Any]]:
    gaps: list[dict[str, Any]] = run_cli_json("gaps", run)
    return gaps


def test_a_capture_is_a_row_and_the_attempt_pointer(repo: Path, settings: Settings) -> None:
    first = _snap(repo, "--label", "start")
    assert first == {"seq": 1, "commit_id": jj_at(repo), "deduped": False}
    (row,) = _rows(settings)
    assert (row.seq, row.commit_id, row.source, row.label) == (1, first["commit_id"], "manual",
                                                                "start")
    assert row.change_id and row.operation_id and row.worktree == str(repo.resolve())
    (attempt,) = run_cli_json("attempts", RUN)
    assert attempt["jj_pointer"] == first["commit_id"]


def test_an_unchanged_tree_names_the_existing_seq(repo: Path, settings: Settings) -> None:
    _snap(repo)
    (repo / "a.txt").write_text("a\n")
    second = _snap(repo)
    again = _snap(repo)
    assert again == {"seq": 2, "commit_id": second["commit_id"], "deduped": True}
    assert [r.seq for r in _rows(settings)] == [1, 2]
    done = run_cli("snapshot", str(repo), "--run", RUN, "--node", "n")
    assert done.returncode == 0 and "unchanged" in done.stdout
    (repo / "a.txt").write_text("b\n")
    assert _snap(repo)["seq"] == 3


def test_dedup_is_per_attempt(repo: Path, settings: Settings) -> None:
    one = _snap(repo)
    other = _snap(repo, "--attempt", "2")
    assert other == {"seq": 1, "commit_id": one["commit_id"], "deduped": False}


def test_a_request_id_seen_before_is_answered_from_its_row(
    repo: Path, settings: Settings
) -> None:
    key = AttemptKey(RUN, "n", 0, 1)
    root = resolve_worktree(repo)
    first = capture_once(settings, key=key, worktree=root, source="hook", request_id="req-1",
                         lock_timeout_s=60)
    (repo / "later.txt").write_text("changed after the first answer\n")
    replay = capture_once(settings, key=key, worktree=root, source="hook", request_id="req-1",
                          lock_timeout_s=60)
    assert (replay.seq, replay.commit_id) == (first.seq, first.commit_id) == (1, first.commit_id)
    assert len(_rows(settings)) == 1
    fresh = capture_once(settings, key=key, worktree=root, source="hook", request_id="req-2",
                         lock_timeout_s=60)
    assert fresh.seq == 2 and fresh.commit_id != first.commit_id


@pytest.mark.slow
def test_seq_is_gap_free_across_service_restarts_and_in_process_captures(
    repo: Path, tmp_path: Path, settings: Settings
) -> None:
    answers: list[dict[str, Any]] = []

    def edit_and_snap(n: int) -> None:
        (repo / "counter.txt").write_text(f"{n}\n")
        answers.append(_snap(repo))

    service = start_service(tmp_path)
    try:
        for n in range(3):
            edit_and_snap(n)
        assert (ping(settings.socket_path) or {}).get("captures") == 3
    finally:
        service.stop()
    for n in range(3, 5):  # no service: in-process, under the same lock
        edit_and_snap(n)
    (repo / "counter.txt").write_text("hook\n")
    hooked = run_cli("snapshot-hook", input=json.dumps(hook_payload(repo, session_id=RUN)),
                     env=_env(DURABILITY_NODE_ID="n"))
    assert hooked.returncode == 0 and hooked.stdout == "" and hooked.stderr == ""
    service = start_service(tmp_path)
    try:
        for n in range(5, 8):
            edit_and_snap(n)
        assert (ping(settings.socket_path) or {}).get("captures") == 3
    finally:
        service.stop()
    rows = _rows(settings)
    assert [r.seq for r in rows] == list(range(1, 10))
    assert [a["seq"] for a in answers] == [1, 2, 3, 4, 5, 7, 8, 9]
    assert rows[5].source == "hook" and rows[5].tool_use_id == "toolu_1"
    assert len({r.commit_id for r in rows}) == 9
    (attempt,) = run_cli_json("attempts", RUN)
    assert attempt["jj_pointer"] == rows[-1].commit_id == answers[-1]["commit_id"]


def _env(**extra: str) -> dict[str, str]:
    import os

    return {**os.environ, **extra}


# -- failures -------------------------------------------------------------------


def _failing_jj(tmp_path: Path, body: str) -> Path:
    """A jj that answers --version like the real one and otherwise runs ``body``."""
    return write_script(tmp_path / "failing-jj", (
        "#!/bin/sh\n"
        f'[ "$1" = "--version" ] && exec {shlex.quote(jj_path())} --version\n'
        f"{body}\n"
    ))


def test_jj_exiting_1_is_a_jj_failed_gap(repo: Path, tmp_path: Path) -> None:
    fake = _failing_jj(tmp_path, 'echo "Error: the disk is on fire" >&2\nexit 1')
    done = run_cli("snapshot", str(repo), "--run", RUN, "--node", "n", "--json",
                   env=_env(DURABILITY_JJ=str(fake)))
    assert done.returncode == 5 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("durability: jj-failed: ")
    (gap,) = _gaps()
    assert gap["reason"] == "jj-failed" and "the disk is on fire" in gap["detail"]
    assert (gap["node_id"], gap["source"], gap["worktree"]) == ("n", "manual",
                                                                str(repo.resolve()))


def test_a_corrupt_working_copy_is_a_jj_failed_gap_filed_once(
    repo: Path, tmp_path: Path, settings: Settings
) -> None:
    (repo / ".jj" / "working_copy" / "checkout").write_bytes(b"\xff\x00not a checkout")
    service = start_service(tmp_path)
    try:
        payload = hook_payload(repo, session_id=RUN, tool_use_id="toolu_broken")
        hooked = run_cli("snapshot-hook", input=json.dumps(payload))
    finally:
        service.stop()
    assert hooked.returncode == 0 and hooked.stdout == ""
    (gap,) = _gaps()  # the service filed it; the hook did not file it again
    assert gap["reason"] == "jj-failed" and gap["tool_use_id"] == "toolu_broken"
    assert "jj log failed" in gap["detail"]
    assert _rows(settings) == []


def test_a_slow_jj_is_a_jj_timeout_gap_and_is_killed(repo: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    fake = _failing_jj(tmp_path, (
        f"sleep 300 &\necho $! >> {pids}\necho $$ >> {pids}\nwait"
    ))
    done = run_cli("snapshot", str(repo), "--run", RUN, "--node", "n",
                   env=_env(DURABILITY_JJ=str(fake), DURABILITY_JJ_TIMEOUT_MS="1500"))
    assert done.returncode == 5 and "jj-timeout" in done.stderr
    (gap,) = _gaps()
    assert gap["reason"] == "jj-timeout" and "killed" in gap["detail"]
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    # The script and the child it started: the whole process group is gone.
    wait_for(lambda: not any(pid_alive(p) for p in started), timeout=30)


def test_a_missing_jj_is_a_jj_missing_gap(tmp_path: Path) -> None:
    # Not colocated: a colocated repository without jj is captured through git.
    repo = make_jj_repo(tmp_path / "jj-only", colocate=False)
    done = run_cli("snapshot", str(repo), "--run", RUN, "--node", "n",
                   env=_env(DURABILITY_JJ=str(tmp_path / "no-jj")))
    assert done.returncode == 5 and "jj-missing" in done.stderr
    assert [g["reason"] for g in _gaps()] == ["jj-missing"]


# -- the store cannot be written --------------------------------------------------


def _spooled(settings: Settings) -> list[dict[str, Any]]:
    return [r for path in spool.spool_files(settings.spool_dir)
            for r in spool.read_spool(path).records]


@pytest.mark.sqlite_file
def test_an_unopenable_store_still_captures_and_the_gap_names_the_commit(
    repo: Path, settings: Settings
) -> None:
    settings.db_path.mkdir(parents=True)  # a folder where the database should be
    done = run_cli("snapshot", str(repo), "--run", RUN, "--node", "n")
    assert done.returncode == 6, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        f"durability: store-unavailable: the state database {settings.db_path} is not a "
        "regular file")
    commit = jj_at(repo)
    (gap,) = _spooled(settings)
    assert gap["reason"] == "store-unavailable" and commit in gap["detail"]
    assert git(repo, "rev-parse", f"refs/durability/jj/{commit}").stdout.strip() == commit


@pytest.mark.sqlite_file
def test_a_locked_store_with_the_service_running(
    repo: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service in this process, so that its store can give up on the held
    # lock after 0.5 s rather than the default 10 s: the same failure, the
    # same answer over the socket, without the wait.
    monkeypatch.setattr(server, "Store", functools.partial(Store, busy_timeout_ms=500))
    service = Service(settings)
    service.start()
    assert service.store is not None and service.store.busy_timeout_ms == 500
    blocker = sqlite3.connect(settings.db_path, isolation_level=None)
    try:
        blocker.execute("BEGIN EXCLUSIVE")  # every writer now times out
        answer = client.call(settings.socket_path, {
            "v": 1, "op": "capture", "request_id": "locked-1", "run_id": RUN, "node_id": "n",
            "worktree": str(repo.resolve()), "source": "hook", "timeout_ms": 120_000,
        }, timeout_s=120)
        commit = jj_at(repo)
        blocker.execute("ROLLBACK")
        assert answer["ok"] is False and answer["gap_recorded"] is True
        assert answer["error"]["code"] == "store-unavailable"
        (gap,) = _gaps()
        assert gap["request_id"] == "locked-1" and commit in gap["detail"]
        assert _rows(settings) == []
        assert _snap(repo)["seq"] == 1  # the service recovers once the lock is gone
    finally:
        blocker.close()
        service.stop()

