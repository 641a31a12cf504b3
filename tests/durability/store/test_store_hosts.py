"""A worktree is its machine and its path (migration 0012): two machines
sharing one store with repositories at one path never share rows, seqs,
gc's rows, bases, watches or remotes.  On each backend (``db_location``):
the same store tests for SQLite and PostgreSQL."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from durability.store import AttemptKey, Gap, NewCheckpoint, NotFound, Store, host
from durability.store.database import Location, migrate, open_database
from durability.store.db import write_transaction
from durability.store.gc_rows import apply, retention_rows
from durability.store.host import HOST_ID_FILE
from durability.store.remote_rows import PUSHED, Remotes
from durability.store.watch_rows import Watches, WatchRow

KEY = AttemptKey("run", "node", 0, 1)
PATH = "/workspace"


def _new(host: str, n: int, worktree: str = PATH) -> NewCheckpoint:
    return NewCheckpoint(key=KEY, commit_id=f"{host}{n}".ljust(40, "0"), worktree=worktree,
                         source="hook", request_id=f"req-{host}-{n}")


@contextmanager
def _two(location: Location) -> Iterator[tuple[Store, Store]]:
    with Store(location, host="m1") as m1, Store(location, host="m2") as m2:
        yield m1, m2


def test_seqs_are_numbered_per_machine(db_location: Location) -> None:
    with _two(db_location) as (m1, m2):
        assert [m1.record_checkpoint(_new("m1", n)).seq for n in (1, 2, 3)] == [1, 2, 3]
        assert [m2.record_checkpoint(_new("m2", n)).seq for n in (1, 2)] == [1, 2]
        assert m1.record_checkpoint(_new("m1", 4)).seq == 4
        assert [c.commit_id[:3] for c in m1.worktree_checkpoints(PATH)] == ["m11", "m12",
                                                                           "m13", "m14"]
        assert [c.request_id for c in m2.checkpoints(KEY.run_id)] == ["req-m2-1", "req-m2-2"]
        assert m2.checkpoint(KEY).seq == 2  # its own latest, not machine 1's seq 4
        assert m2.checkpoint(KEY, 1).request_id == "req-m2-1"
        with pytest.raises(NotFound, match=r"seq 1 to 2"):
            m2.checkpoint(KEY, 3)
        assert m2.latest_attempt(KEY.run_id, KEY.node_id) == KEY
        with Store(db_location, host="m3") as m3:
            assert m3.worktree_checkpoints(PATH) == []
            with pytest.raises(NotFound):
                m3.latest_attempt(KEY.run_id, KEY.node_id)


def test_the_same_commit_on_another_machine_is_its_own_checkpoint(
        db_location: Location) -> None:
    with _two(db_location) as (m1, m2):
        one = m1.record_checkpoint(_new("x", 1))
        other = m2.record_checkpoint(NewCheckpoint(key=KEY, commit_id=_new("x", 1).commit_id,
                                                   worktree=PATH, source="hook",
                                                   request_id="req-other"))
        assert (one.seq, one.deduped, other.seq, other.deduped) == (1, False, 1, False)


def test_gaps_and_sessions_of_a_path_are_the_machine_s(db_location: Location) -> None:
    with _two(db_location) as (m1, m2):
        m1.record_checkpoint(_new("m1", 1))
        m2.add_gaps([Gap(5, "run-m2", "gap-m2", "jj-failed", worktree=PATH)])
        assert m1.worktree_gaps(PATH) == []
        assert [g.request_id for g in m2.worktree_gaps(PATH)] == ["gap-m2"]
        assert [s.run_id for s in m1.sessions(PATH)] == ["run"]
        assert [(s.run_id, s.checkpoints, s.gaps) for s in m2.sessions(PATH)] == [
            ("run-m2", 0, 1)]
        assert [s.run_id for s in m2.sessions()] == ["run-m2"]


def test_gc_rows_are_the_machine_s_and_its_drops_touch_no_other(
        db_location: Location) -> None:
    with _two(db_location) as (m1, m2):
        for n in (1, 2, 3):
            m1.record_checkpoint(_new("m1", n))
            m2.record_checkpoint(_new("m2", n))
        rows = retention_rows(m1, [PATH])
        assert [(r.checkpoint.request_id, r.max_seq) for r in rows] == [
            ("req-m1-1", 3), ("req-m1-2", 3), ("req-m1-3", 3)]
        assert retention_rows(m1) == rows
        # Machine 2's seq 1 and 2 have the same keys as machine 1's: untouched.
        assert apply(m1, [r.checkpoint for r in rows]).dropped == 2  # its newest stays
        assert [c.seq for c in m1.checkpoints(KEY.run_id)] == [3]
        assert [c.seq for c in m2.checkpoints(KEY.run_id)] == [1, 2, 3]
        # Machine 2's newest is its own seq 3, whatever machine 1 holds.
        assert apply(m2, m2.checkpoints(KEY.run_id)[:2]).dropped == 2


def test_watches_of_one_path_are_each_machine_s(db_location: Location) -> None:
    w1, w2 = Watches(db_location, host="m1"), Watches(db_location, host="m2")
    w1.put(WatchRow(PATH, KEY, 100, 1000))
    w2.put(WatchRow(PATH, AttemptKey("other", "n"), 200, 2000))
    assert [(w.key.run_id, w.settle_ms) for w in w1.all()] == [("run", 100)]
    assert [(w.key.run_id, w.settle_ms) for w in w2.all()] == [("other", 200)]
    assert w1.remove(PATH) is not None
    assert w1.all() == [] and len(w2.all()) == 1


def test_remotes_and_replication_of_one_path_are_each_machine_s(
        db_location: Location) -> None:
    with _two(db_location) as (m1, m2):
        r1, r2 = Remotes(db_location, host="m1"), Remotes(db_location, host="m2")
        r1.add(PATH, "origin", "file:///one.git")
        r2.add(PATH, "origin", "file:///two.git")  # the same name: another machine's remote
        m1.record_checkpoint(_new("m1", 1))
        m2.record_checkpoint(_new("m2", 1))
        m2.record_checkpoint(_new("m2", 2))
        assert [(p.checkpoint.request_id, p.remote.url) for p in r1.pending()] == [
            ("req-m1-1", "file:///one.git")]
        assert [p.checkpoint.request_id for p in r2.pending()] == ["req-m2-1", "req-m2-2"]
        r2.mark(r2.pending()[:1], PUSHED)
        assert [p.checkpoint.request_id for p in r1.pending()] == ["req-m1-1"]
        r1.remove(PATH, "origin")
        assert r1.all() == [] and r1.pending() == []
        assert [r.url for r in r2.all()] == ["file:///two.git"]
        assert [p.checkpoint.request_id for p in r2.pending()] == ["req-m2-2"]
        assert r2.states(m2.checkpoints(KEY.run_id)) == {
            "req-m2-1": {"origin": "pushed"}, "req-m2-2": {"origin": "pending"}}


def test_another_machine_s_checkpoints_imported_from_a_remote_are_this_machine_s_copy(
        db_location: Location) -> None:
    """``restore --from-remote`` on a machine sharing the store with the one
    that took the run: the remote's entries carry request ids already on
    record (the other machine's rows, and request ids are unique).  This
    machine records its own copy of each, once, marked pushed to the remote
    it came from; the other machine's rows and the attempt's pointer stay
    as they were, and an entry carrying another checkpoint's request id is
    still not recorded."""
    with _two(db_location) as (m1, m2):
        for n in (1, 2, 3):
            m1.record_checkpoint(_new("m1", n))
        before = m1.checkpoints(KEY.run_id)
        listed = [replace(c, worktree="/there") for c in before[:2]]  # the remote's manifest
        forged = replace(listed[0], seq=7, request_id=before[2].request_id)
        r2 = Remotes(db_location, host="m2")
        r2.add("/there", "backup", "file:///b.git")
        assert r2.import_checkpoints([*listed, forged], pushed_to="backup") == 2
        assert r2.import_checkpoints(listed, pushed_to="backup") == 0  # once
        mine = m2.checkpoints(KEY.run_id)
        assert [(c.seq, c.commit_id, c.worktree, c.label) for c in mine] == [
            (c.seq, c.commit_id, "/there", c.label) for c in before[:2]]
        assert not {c.request_id for c in mine} & {c.request_id for c in before}
        assert r2.pending() == []
        assert r2.states(mine) == {c.request_id: {"backup": "pushed"} for c in mine}
        assert m1.checkpoints(KEY.run_id) == before
        [attempt] = m1.attempts(KEY.run_id)
        assert attempt.jj_pointer == before[2].commit_id  # machine 1's newest, not seq 2


def test_a_copy_whose_request_id_is_a_gap_here_is_not_recorded(db_location: Location) -> None:
    """The copy's request id (``<request id>@<machine id>``) on record as a
    gap (forged: a hook's request id never has that form): the copy is not
    recorded, as a checkpoint whose request id is a gap is not."""
    with _two(db_location) as (m1, m2):
        m1.record_checkpoint(_new("m1", 1))
        listed = [replace(c, worktree="/there") for c in m1.checkpoints(KEY.run_id)]
        assert m2.add_gaps([Gap(1, KEY.run_id, "req-m1-1@m2", "timeout")]) == 1
        r2 = Remotes(db_location, host="m2")
        r2.add("/there", "backup", "file:///b.git")
        assert r2.import_checkpoints(listed, pushed_to="backup") == 0
        assert m2.checkpoints(KEY.run_id) == []
        assert isinstance(m2.request_record("req-m1-1@m2"), Gap)


def test_rows_before_the_migration_are_the_migrating_machine_s(db_location: Location) -> None:
    conn = open_database(db_location)
    try:
        migrate(conn, host="old", upto=11)
        with write_transaction(conn):  # what a toolkit before 0012 recorded
            conn.execute("INSERT INTO runs (run_id, created_at_ms) VALUES ('run', 1)")
            conn.execute("INSERT INTO attempts (run_id, node_id, iteration, attempt, "
                         "started_at_ms) VALUES ('run', 'node', 0, 1, 1)")
            conn.execute("INSERT INTO workspace_checkpoints (run_id, node_id, iteration, "
                         "attempt, seq, commit_id, worktree, source, request_id, "
                         "created_at_ms) VALUES ('run', 'node', 0, 1, 1, 'c1', $1, 'hook', "
                         "'r1', 1)", (PATH,))
            conn.execute("INSERT INTO gaps (request_id, ts_ms, run_id, worktree, reason) "
                         "VALUES ('g1', 2, 'run', $1, 'jj-failed')", (PATH,))
            conn.execute("INSERT INTO watches (worktree, run_id, node_id, iteration, attempt, "
                         "settle_ms, max_delay_ms, created_at_ms) VALUES ($1, 'run', 'node', "
                         "0, 1, 1, 1, 1)", (PATH,))
            conn.execute("INSERT INTO remotes (worktree, name, url, created_at_ms) "
                         "VALUES ($1, 'origin', 'file:///o.git', 1)", (PATH,))
            conn.execute("INSERT INTO replication_outbox (request_id, worktree, remote) "
                         "VALUES ('r1', $1, 'origin')", (PATH,))
    finally:
        conn.close()
    with Store(db_location, host="old") as old, Store(db_location, host="new") as new:
        assert [c.request_id for c in old.worktree_checkpoints(PATH)] == ["r1"]
        assert [g.request_id for g in old.worktree_gaps(PATH)] == ["g1"]
        assert new.worktree_checkpoints(PATH) == [] and new.worktree_gaps(PATH) == []
        assert old.record_checkpoint(_new("old", 2)).seq == 2  # numbering goes on
        assert new.record_checkpoint(_new("new", 1)).seq == 1
    assert len(Watches(db_location, host="old").all()) == 1
    assert Watches(db_location, host="new").all() == []
    old_remotes = Remotes(db_location, host="old")
    assert [p.checkpoint.request_id for p in old_remotes.pending()] == ["r1", "req-old-2"]
    assert Remotes(db_location, host="new").pending() == []


def test_the_migration_gives_the_rows_there_the_kept_machine_id(
        db_location: Location, monkeypatch: pytest.MonkeyPatch) -> None:
    # Not the host name: they stay this machine's after it is renamed.
    conn = open_database(db_location)
    try:
        migrate(conn, upto=11)
        with write_transaction(conn):
            conn.execute("INSERT INTO runs (run_id, created_at_ms) VALUES ('run', 1)")
            conn.execute("INSERT INTO attempts (run_id, node_id, iteration, attempt, "
                         "started_at_ms) VALUES ('run', 'node', 0, 1, 1)")
            conn.execute("INSERT INTO workspace_checkpoints (run_id, node_id, iteration, "
                         "attempt, seq, commit_id, worktree, source, request_id, "
                         "created_at_ms) VALUES ('run', 'node', 0, 1, 1, 'c1', $1, 'hook', "
                         "'r1', 1)", (PATH,))
    finally:
        conn.close()
    with Store(db_location) as store:  # migrates, under this machine's id
        assert [c.request_id for c in store.worktree_checkpoints(PATH)] == ["r1"]
    kept = (Path(os.environ["DURABILITY_HOME"]) / HOST_ID_FILE).read_text().strip()
    conn = open_database(db_location)
    try:
        assert conn.execute("SELECT host FROM workspace_checkpoints").fetchall() == [(kept,)]
    finally:
        conn.close()
    monkeypatch.setattr(socket, "gethostname", lambda: "renamed")
    host._cache.clear()  # a new process, on the renamed machine
    with Store(db_location) as store:
        assert [c.request_id for c in store.worktree_checkpoints(PATH)] == ["r1"]
        assert store.record_checkpoint(_new("x", 2)).seq == 2


def test_a_moved_worktree_s_records_follow_it_on_its_machine_only(
        db_location: Location) -> None:
    with _two(db_location) as (m1, m2):
        m1.record_checkpoint(_new("m1", 1))
        m1.add_gaps([Gap(5, "run", "gap-m1", "jj-failed", worktree=PATH)])
        m2.record_checkpoint(_new("m2", 1))
        Watches(db_location, host="m1").put(WatchRow(PATH, KEY, 100, 1000))
        Remotes(db_location, host="m1").add(PATH, "origin", "file:///one.git")
        assert m1.knows_worktree(PATH) and not m1.knows_worktree("/moved")
        assert m1.move_worktree(PATH, "/moved") == 1
        assert m1.worktree_checkpoints(PATH) == [] and m1.worktree_gaps(PATH) == []
        assert [c.request_id for c in m1.worktree_checkpoints("/moved")] == ["req-m1-1"]
        assert [g.request_id for g in m1.worktree_gaps("/moved")] == ["gap-m1"]
        assert m1.record_checkpoint(_new("m1", 2, worktree="/moved")).seq == 2
        assert [w.worktree for w in Watches(db_location, host="m1").all()] == ["/moved"]
        remotes = Remotes(db_location, host="m1")
        assert [r.worktree for r in remotes.all()] == ["/moved"]
        assert [p.checkpoint.request_id for p in remotes.pending()] == ["req-m1-1", "req-m1-2"]
        assert [c.request_id for c in m2.worktree_checkpoints(PATH)] == ["req-m2-1"]
