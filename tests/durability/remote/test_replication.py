"""The service replicates checkpoints to the remotes of their worktree, in the
background, through a durable outbox (docs/how-to/remote.md): real git repositories,
bare file:// remotes that log every push they take, the installed service."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.remote import replicator
from durability.remote.replicator import Replicator
from durability.store import Store
from durability.store.clock import ManualTimer
from tests.durability.remote.remotekit import (
    add_remote,
    bare_remote,
    capture,
    cli,
    manifest_commits,
    pushes,
    quick_states,
    remote_refs,
    states,
)
from tests.helpers import (
    make_git_repo,
    make_jj_repo,
    ping,
    start_service,
    wait_for,
)


def _all_pushed(remote_name: str = "backup") -> bool:
    return all(s.get(remote_name) == "pushed" for s in quick_states())


def test_a_burst_of_checkpoints_reaches_the_remote_each_ref_update_once(
        tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    svc = start_service(tmp_path)
    try:
        commits = [capture(repo, f"call {i}") for i in range(12)]
        wait_for(lambda: manifest_commits(remote) == set(commits), timeout=30)
        wait_for(_all_pushed, timeout=60)
    finally:
        assert svc.stop() == 0
    taken = pushes(remote)
    assert 1 <= len(taken) <= len(commits)
    updates = [line for push in taken for line in push]
    assert len(updates) == len(set(updates))  # no ref moved to the same commit twice
    # The attempt's git pin on the remote is the newest checkpoint: its chain
    # of parents carries every earlier one.
    pins = {r: c for r, c in remote_refs(remote).items() if r.startswith("refs/durability/git/")}
    assert list(pins.values()) == [commits[-1]]


@pytest.mark.slow
def test_a_backlog_is_pushed_in_one_push_when_the_service_starts(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    commits = [capture(repo, f"call {i}") for i in range(5)]  # no service: in-process
    assert states() == [{"backup": "pending"}] * 5
    svc = start_service(tmp_path)
    try:
        wait_for(_all_pushed, timeout=30)
    finally:
        assert svc.stop() == 0
    assert len(pushes(remote)) == 1
    assert manifest_commits(remote) == set(commits)
    shown = json.loads(cli("show", "run-r", "--json").stdout)
    assert (shown["seq"], shown["replicated"]) == (5, {"backup": "pushed"})
    assert "replicated: backup pushed" in cli("show", "run-r", "--seq", "2").stdout


@pytest.mark.slow
def test_the_outbox_survives_kill_9_and_nothing_is_pushed_twice(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    away = tmp_path / "away.git"
    add_remote(repo, "backup", remote.as_uri())
    svc = start_service(tmp_path)
    try:
        first = capture(repo, "pushed before the crash")
        wait_for(_all_pushed, timeout=30)
        os.rename(remote, away)  # unreachable: the next checkpoints stay in the outbox
        later = [capture(repo, f"call {i}") for i in range(3)]
        # The replicator tries and fails at least once (its log says so).
        wait_for(lambda: "replication of" in svc.log() and "failed" in svc.log(), timeout=60)
        assert quick_states()[1:] == [{"backup": "pending"}] * 3
    finally:
        svc.kill()  # SIGKILL: nothing is flushed, nothing is said
    os.rename(away, remote)
    assert len(pushes(remote)) == 1
    svc = start_service(tmp_path)
    try:
        wait_for(_all_pushed, timeout=30)
        assert len(pushes(remote)) == 2  # the three in one push
        assert manifest_commits(remote) == {first, *later}
        answer = ping(svc.socket_path)
        assert answer is not None and (answer["pushes"], answer["pushed"]) == (1, 3)
    finally:
        svc.kill()
    # A restart with nothing pending pushes nothing: the replicator, on a
    # timer moved past three of its idle looks.
    settings = Settings.from_env()
    timer = ManualTimer()
    with Store(settings.database) as store:
        rep = Replicator(settings, lambda: store, os.environ, timer=timer)
        rep.start()
        try:
            timer.until_waiting(timeout_s=60)
            for _ in range(3):
                timer.advance(replicator.POLL_S)
                timer.until_waiting(timeout_s=60)
            assert rep.pushes == 0
        finally:
            rep.stop()
    assert len(pushes(remote)) == 2


@pytest.mark.slow
def test_an_unreachable_remote_is_a_replication_failed_gap_after_the_bound(
        tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = tmp_path / "not-yet.git"
    add_remote(repo, "backup", remote.as_uri())
    env = {**os.environ, "DURABILITY_REPLICATION_BOUND_MS": "400"}
    svc = start_service(tmp_path, env=env)
    try:
        capture(repo, "never pushed in time")
        wait_for(lambda: quick_states() == [{"backup": "failed"}], timeout=60)
        assert states() == [{"backup": "failed"}]
        gaps = cli("gaps", "run-r", "--json")
        rows = [g for g in json.loads(gaps.stdout)
                if g["reason"] == "replication-failed"]
        assert len(rows) == 1 and "backup" in rows[0]["detail"]
        bare_remote(remote)  # reachable now: the retries get it there
        wait_for(lambda: quick_states() == [{"backup": "pushed"}], timeout=40)
    finally:
        assert svc.stop() == 0
    # One gap per checkpoint, however many retries failed before.
    again = json.loads(cli("gaps", "run-r", "--json").stdout)
    assert [g["reason"] for g in again] == ["replication-failed"]


def test_jj_checkpoints_are_pinned_and_pushed_one_ref_each(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "jrepo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    svc = start_service(tmp_path)
    try:
        commits = [capture(repo, f"call {i}") for i in range(3)]
        wait_for(_all_pushed, timeout=30)
    finally:
        assert svc.stop() == 0
    refs = remote_refs(remote)
    assert {f"refs/durability/jj/{c}" for c in commits} <= set(refs)
    assert manifest_commits(remote) == set(commits)
    # Only the checkpoint refs and the manifest: no branch, no jj bookkeeping.
    assert all(r.startswith("refs/durability/") for r in refs)


# test_nothing_is_pushed_without_a_named_remote_not_even_to_origin: in
# test_replicator_timer.py (its poked pass and idle look on a moved timer).


def test_a_push_that_hangs_never_holds_a_capture(tmp_path: Path) -> None:
    """The remote takes a push and then waits (its pre-receive hook holds on
    a gate file): captures go on being answered meanwhile, and what they
    recorded goes in the push after the gate opens."""
    import threading

    from tests.helpers import write_script

    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    gate = tmp_path / "gate"
    gate.touch()
    write_script(remote / "hooks" / "pre-receive",
                 f"#!/bin/sh\ncat > /dev/null\nwhile [ -e {gate} ]; do sleep 0.05; done\n")
    add_remote(repo, "backup", remote.as_uri())
    svc = start_service(tmp_path)
    try:
        capture(repo, "its push hangs")
        wait_for(lambda: _push_started(remote), timeout=60)
        later: list[str] = []
        worker = threading.Thread(target=lambda: later.extend(
            capture(repo, f"while it hangs {i}") for i in range(3)))
        worker.start()
        worker.join(60)
        held = worker.is_alive()
        # Read while the push still hangs: once the gate opens, the next push
        # may take the three within half a second, before a slow test looks.
        during = quick_states()[1:]
        gate.unlink()  # whatever happened, let the push finish
        worker.join(60)
        assert not held, "a capture waited for the hanging push"
        assert during == [{"backup": "pending"}] * 3
        wait_for(_all_pushed, timeout=30)
    finally:
        gate.unlink(missing_ok=True)
        assert svc.stop() == 0
    assert manifest_commits(remote) >= set(later)


def _push_started(remote: Path) -> bool:
    """Whether a push is inside the remote: its objects are in git's
    quarantine folder while the pre-receive hook runs."""
    return any((remote / "objects").glob("*incoming-*"))


def test_a_push_whose_record_was_lost_is_recorded_not_pushed_again(tmp_path: Path) -> None:
    """A service killed between git's answer and the store's record: the next
    one finds the remote's manifest at the local tip and records the
    checkpoints as pushed without pushing them again."""
    from durability.config import Settings
    from durability.remote.replicator import Replicator
    from durability.store import Store
    from durability.store.database import open_database
    from durability.store.db import write_transaction

    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "one")
    capture(repo, "two")
    settings = Settings.from_env()
    db = open_database(settings.database)
    with Store(settings.database) as store:
        queued = db.execute("SELECT request_id, worktree, host, remote FROM replication_outbox"
                            ).fetchall()
        first = Replicator(settings, lambda: store, os.environ)
        assert (first.run_once(), first.pushes) == (2, 1)
        with write_transaction(db):  # the record the kill lost
            db.execute("DELETE FROM replication")
            db.executemany("INSERT INTO replication_outbox (request_id, worktree, host, "
                           "remote) VALUES ($1, $2, $3, $4)", queued)
        db.close()
        assert quick_states() == [{"backup": "pending"}] * 2
        second = Replicator(settings, lambda: store, os.environ)
        assert (second.run_once(), second.pushes) == (2, 0)
    assert quick_states() == [{"backup": "pushed"}] * 2
    assert len(pushes(remote)) == 1
