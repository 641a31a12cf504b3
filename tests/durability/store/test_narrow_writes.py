"""Checkpoints written at once by many connections (decision 0059): under
PostgreSQL a checkpoint's write locks only its run and its request (and the
schema's lock shared), every other write the whole schema.  What must hold
whatever the interleaving, on SQLite and PostgreSQL alike: every attempt's
seqs are gapless and unique, each request is on record once (checkpoint or
gap), a gc never deletes an attempt's newest row nor a row written after its
plan, and a run's events are numbered in the order they were recorded.  The
lock tests below check on PostgreSQL which writes wait for which, with a
second connection holding a lock: no timing, only who is refused.

Each writer is a thread with a store (a connection, a server backend) of its
own: what differs between processes is the connection, which this has."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from durability.ground.store_errors import StoreUnavailable
from durability.store import AttemptKey, Gap, NewCheckpoint, RecordRefused, Store
from durability.store.database import Location, open_database
from durability.store.db import write_transaction
from durability.store.dialect import POSTGRESQL
from durability.store.events import read as read_events
from durability.store.gc_rows import apply, retention_rows
from durability.store.postgres import PgConnection
from tests import pg

WRITERS = 6
ROWS = 15


def _new(key: AttemptKey, request_id: str, commit: str) -> NewCheckpoint:
    return NewCheckpoint(key=key, commit_id=commit, worktree=f"/w/{key.run_id}",
                         source="hook", request_id=request_id)


def _together(n: int, work: Callable[[int], None]) -> None:
    """``work(0)`` to ``work(n - 1)``, each in a thread, started together; the
    first failure is raised."""
    start = threading.Barrier(n)
    failed: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as exc:  # re-raised below, in the test's thread
            failed.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[0]


def _seqs(store: Store, key: AttemptKey) -> list[int]:
    return [c.seq for c in store.checkpoints(key.run_id) if c.key == key]


def test_checkpoints_of_many_runs_at_once_are_each_gapless(db_location: Location) -> None:
    Store(db_location).close()
    keys = [AttemptKey(f"run-{i}", "n", 0, 1) for i in range(WRITERS)]
    answers: dict[int, list[int]] = defaultdict(list)

    def write(i: int) -> None:
        with Store(db_location) as store:
            for n in range(ROWS):
                answers[i].append(store.record_checkpoint(
                    _new(keys[i], f"q-{i}-{n}", f"{i:02x}{n:038x}")).seq)

    _together(WRITERS, write)
    with Store(db_location) as store:
        for i, key in enumerate(keys):
            assert answers[i] == list(range(1, ROWS + 1))
            assert _seqs(store, key) == list(range(1, ROWS + 1))
            assert store.attempts(key.run_id)[0].jj_pointer == f"{i:02x}{ROWS - 1:038x}"
            with store._conn() as conn:
                events = read_events(conn, key.run_id)
            # A run's events in id order are its checkpoints in seq order.
            assert [e.seq for e in events if e.kind == "checkpoint"] == list(range(1, ROWS + 1))


def test_checkpoints_of_one_attempt_from_many_writers_are_gapless_and_unique(
        db_location: Location) -> None:
    Store(db_location).close()
    key = AttemptKey("run-shared", "n", 0, 1)
    answers: dict[str, int] = {}

    def write(i: int) -> None:
        with Store(db_location) as store:
            for n in range(ROWS):
                request = f"q-{i}-{n}"
                answers[request] = store.record_checkpoint(
                    _new(key, request, f"{i:02x}{n:038x}")).seq

    _together(WRITERS, write)
    with Store(db_location) as store:
        rows = [c for c in store.checkpoints(key.run_id) if c.key == key]
    assert [c.seq for c in rows] == list(range(1, WRITERS * ROWS + 1))
    assert {c.request_id: c.seq for c in rows} == answers


def test_a_request_raced_as_checkpoint_and_gap_is_on_record_once(
        db_location: Location) -> None:
    Store(db_location).close()
    key = AttemptKey("run-race", "n", 0, 1)
    requests = [f"q{n}" for n in range(20)]
    refused: set[str] = set()

    def write(i: int) -> None:
        with Store(db_location) as store:
            for n, request in enumerate(requests):
                if i == 0:
                    try:
                        store.record_checkpoint(_new(key, request, f"{n:040x}"))
                    except RecordRefused:
                        refused.add(request)
                else:
                    store.add_gaps([Gap(ts_ms=1, run_id=key.run_id, request_id=request,
                                        reason="timeout", node_id="n", iteration=0,
                                        attempt=1, worktree="/w", source="hook")])

    _together(2, write)
    with Store(db_location) as store:
        recorded = {c.request_id for c in store.checkpoints(key.run_id)}
        gaps = {g.request_id for g in store.gaps(key.run_id)}
    assert recorded | gaps == set(requests)
    assert not recorded & gaps
    assert refused == gaps


def test_a_gc_racing_checkpoints_keeps_the_newest_and_every_row_after_its_plan(
        db_location: Location) -> None:
    Store(db_location).close()
    keys = [AttemptKey(f"run-gc-{i}", "n", 0, 1) for i in range(3)]
    written: dict[AttemptKey, list[int]] = defaultdict(list)
    planned: set[tuple[AttemptKey, int]] = set()
    done = threading.Event()
    writing = [len(keys)]
    count = threading.Lock()

    def work(i: int) -> None:
        with Store(db_location) as store:
            if i < len(keys):
                try:
                    for n in range(ROWS * 2):
                        written[keys[i]].append(store.record_checkpoint(
                            _new(keys[i], f"q-{i}-{n}", f"{i:02x}{n:038x}")).seq)
                finally:
                    with count:
                        writing[0] -= 1
                        if not writing[0]:
                            done.set()
                return
            while not done.is_set():
                # A plan read without any lock, applied later: every row
                # but the newest the plan saw.
                rows = retention_rows(store)
                drop = [r.checkpoint for r in rows if r.checkpoint.seq < r.max_seq]
                planned.update((r.key, r.seq) for r in drop)
                apply(store, drop)

    _together(len(keys) + 1, work)
    with Store(db_location) as store:
        for key in keys:
            # Seqs are never handed out twice, though gc deleted rows meanwhile.
            assert written[key] == list(range(1, ROWS * 2 + 1))
            left = _seqs(store, key)
            assert left[-1] == ROWS * 2  # the newest stays
            # Whatever went was in a plan; a row written after every plan stays.
            gone = set(written[key]) - set(left)
            assert all((key, seq) in planned for seq in gone)
            pointer = store.attempts(key.run_id)[0].jj_pointer
            assert pointer == store.checkpoint(key).commit_id


def test_an_event_written_with_its_own_id_is_not_given_out_again(
        db_location: Location) -> None:
    # What a toolkit older than migration 0018 (the largest id plus one) and
    # ``durability migrate --to`` (ids copied) write: the next event, taken
    # from PostgreSQL's sequence, is past it.
    key = AttemptKey("run-ids", "n", 0, 1)
    with Store(db_location) as store:
        store.record_checkpoint(_new(key, "q1", "a" * 40))
        with store._conn() as db, write_transaction(db) as conn:
            top = int(conn.execute("SELECT MAX(id) FROM events").fetchone()[0])
            for extra in (top + 1, top + 5):
                conn.execute("INSERT INTO events (id, ts_ms, run_id, kind) "
                             "VALUES ($1, 1, $2, 'gap')", (extra, key.run_id))
        store.record_checkpoint(_new(key, "q2", "b" * 40))
        with store._conn() as conn:
            events = read_events(conn, key.run_id)
    assert [e.id for e in events][-3:] == [top + 1, top + 5, top + 6]


# -- which write waits for which (PostgreSQL) -----------------------------------


def _holder(url: str, keys: tuple[str, ...]) -> PgConnection:
    """A connection inside a write that holds ``keys`` (none: the whole schema)."""
    holder = open_database(url)
    assert isinstance(holder, PgConnection)
    POSTGRESQL.begin_write(holder, keys)
    return holder


def _gap(run: str, request: str) -> Gap:
    return Gap(ts_ms=1, run_id=run, request_id=request, reason="timeout")


@pytest.mark.parametrize("held", ["run", "request"])
def test_a_checkpoint_waits_only_for_a_write_of_its_run_or_its_request(
        pg_server: pg.PgServer, held: str) -> None:
    url = pg_server.fresh_url()
    Store(url).close()
    holder = _holder(url, ("run:busy",) if held == "run" else ("request:busy",))
    try:
        with Store(url, busy_timeout_ms=200) as store:
            # Another run, another request: written while the lock is held.
            assert store.record_checkpoint(_new(AttemptKey("free", "n", 0, 1), "q1",
                                                "a" * 40)).seq == 1
            busy = (_new(AttemptKey("busy", "n", 0, 1), "q2", "b" * 40) if held == "run"
                    else _new(AttemptKey("free", "n", 0, 1), "busy", "c" * 40))
            with pytest.raises(StoreUnavailable, match="locked"):
                store.record_checkpoint(busy)
            # Every other write takes the whole schema: it waits for any checkpoint.
            with pytest.raises(StoreUnavailable, match="locked"):
                store.add_gaps([_gap("free", "q9")])
            holder.execute("ROLLBACK")
            assert store.record_checkpoint(busy).seq in (1, 2)
            assert store.add_gaps([_gap("free", "q9")]) == 1
    finally:
        holder.close()


def test_a_write_of_the_whole_schema_holds_off_every_checkpoint(
        pg_server: pg.PgServer) -> None:
    url = pg_server.fresh_url()
    with Store(url) as store:
        store.record_checkpoint(_new(AttemptKey("r", "n", 0, 1), "q1", "a" * 40))
    holder = _holder(url, ())
    try:
        with Store(url, busy_timeout_ms=200) as store:
            with pytest.raises(StoreUnavailable, match="locked"):
                store.record_checkpoint(_new(AttemptKey("other", "n", 0, 1), "q2", "b" * 40))
            rows = retention_rows(store)  # a read: never waits
            assert [r.checkpoint.seq for r in rows] == [1]
            holder.execute("ROLLBACK")
            assert store.record_checkpoint(
                _new(AttemptKey("other", "n", 0, 1), "q2", "b" * 40)).seq == 1
    finally:
        holder.close()


def test_a_sqlite_write_takes_the_whole_lock_whatever_keys_it_names(tmp_path: Path) -> None:
    # One writer at a time: a write naming keys is BEGIN IMMEDIATE as any other.
    path = tmp_path / "state.db"
    Store(path).close()
    holder = open_database(path)
    try:
        with write_transaction(holder, keys=("run:busy",)), \
                Store(path, busy_timeout_ms=100) as store, \
                pytest.raises(StoreUnavailable, match="locked"):
            store.record_checkpoint(_new(AttemptKey("free", "n", 0, 1), "q1", "a" * 40))
    finally:
        holder.close()
