"""A boundary names its checkpoint row's commit, or none (decision 0057), on
SQLite and PostgreSQL: recorded from the row, renamed and cleared in the
transaction that renames or drops the row (``gc_rows.apply``), the history
of a forgotten commit rewritten, and migration 0017 bringing boundaries
recorded before in line."""

from __future__ import annotations

from collections.abc import Callable

from durability.store import AttemptKey, NewCheckpoint, Store
from durability.store.boundaries import (
    COLLECTED,
    NewBoundary,
    boundaries,
    insert_boundary,
    record_boundaries,
)
from durability.store.database import Location, is_url, migrate, open_database
from durability.store.db import Connection, write_transaction
from durability.store.gc_rows import apply, retention_rows
from durability.store.models import Recorded
from durability.store.postgres import read_back
from durability.store.text import to_db

KEY = AttemptKey("sess-b", "session", 0, 1)


def _cid(n: int) -> str:
    return f"{n:040x}"


def _checkpoint(store: Store, n: int) -> None:
    store.record_checkpoint(NewCheckpoint(key=KEY, commit_id=_cid(n), worktree="/w",
                                          source="hook", request_id=f"r{n}"))


def _boundary(store: Store, call: str, seq: int, commit: str) -> None:
    record_boundaries(store, [NewBoundary(key=KEY, request_id=f"b-{call}", checkpoint_seq=seq,
                                          commit_id=commit, worktree="/w", harness="claude",
                                          tool_use_id=call)])


def _named(store: Store) -> list[tuple[str | None, int, str]]:
    return [(b.tool_use_id, b.checkpoint_seq, b.commit_id) for b in boundaries(store, "sess-b")]


def test_a_boundary_takes_its_rows_commit_or_none(db_location: Location) -> None:
    with Store(db_location) as store:
        _checkpoint(store, 1)
        _boundary(store, "t1", 1, _cid(1))
        # An answer that named a commit the row no longer does (a gc renamed
        # or dropped it between the answer and this write).
        _boundary(store, "t2", 1, _cid(99))
        _boundary(store, "t3", 7, _cid(7))
        assert _named(store) == [("t1", 1, _cid(1)), ("t2", 1, _cid(1)), ("t3", 7, COLLECTED)]
        assert [b.collected for b in boundaries(store, "sess-b")] == [False, False, True]


def test_gc_renames_and_clears_the_boundaries_with_their_rows(db_location: Location) -> None:
    with Store(db_location) as store:
        for n in (1, 2, 3):
            _checkpoint(store, n)
        for call, seq in (("t1", 1), ("t2", 1), ("t3", 2), ("t4", 3)):
            _boundary(store, call, seq, _cid(seq))
        first = store.checkpoints("sess-b")[0]
        done = apply(store, [first], {_cid(2): _cid(22), _cid(3): _cid(33)})
        assert (done.dropped, done.renamed) == (1, 2)
        assert _named(store) == [("t1", 1, COLLECTED), ("t2", 1, COLLECTED),
                                 ("t3", 2, _cid(22)), ("t4", 3, _cid(33))]
        rows = {r.checkpoint.commit_id for r in retention_rows(store)}
        assert {b.commit_id for b in boundaries(store, "sess-b")} - {COLLECTED} <= rows


def test_retention_rows_carry_the_newest_boundary_naming_them(db_location: Location) -> None:
    with Store(db_location) as store:
        for n in (1, 2):
            _checkpoint(store, n)
        _boundary(store, "t1", 1, _cid(1))
        _boundary(store, "t2", 1, _cid(1))
        by_seq = {r.checkpoint.seq: r.called_at_ms for r in retention_rows(store)}
        newest = max(b.created_at_ms for b in boundaries(store, "sess-b"))
        assert by_seq == {1: newest, 2: None}


def test_a_forgotten_commit_leaves_no_record_naming_it(db_location: Location) -> None:
    with Store(db_location) as store:
        for n in (1, 2):
            _checkpoint(store, n)
        _boundary(store, "t2", 2, _cid(2))
        with store._conn() as db, write_transaction(db) as conn:
            conn.execute("INSERT INTO run_forks (run_id, parent_run_id, node_id, iteration, "
                         "attempt, seq, commit_id, copied, created_at_ms) VALUES "
                         "('fork-1', 'sess-b', 'session', 0, 1, 2, $1, 0, 1)", (_cid(2),))
            conn.execute("INSERT INTO gaps (request_id, run_id, node_id, iteration, attempt, "
                         "worktree, reason, detail, ts_ms) VALUES ('g1', 'sess-b', 'session', "
                         "0, 1, '/w', 'internal-error', $1, 1)", (f"commit {_cid(2)}: lost",))
        gc_renamed = {_cid(1): _cid(11)}
        apply(store, [], gc_renamed)  # a gc's rename: history stays as it was
        assert _texts(store, _cid(1)) == ["events"]
        apply(store, [], {_cid(2): _cid(22)}, forgotten=True)
        assert _texts(store, _cid(2)) == []
        assert _named(store) == [("t2", 2, _cid(22))]
        assert sorted(_texts(store, _cid(22))) == ["attempts", "boundaries", "events", "gaps",
                                                   "run_forks", "workspace_checkpoints"]


def _texts(store: Store, needle: str) -> list[str]:
    """The tables of ours with a row whose text holds ``needle``."""
    tables = ["workspace_checkpoints", "attempts", "boundaries", "events", "gaps",
              "run_forks", "task_worktrees", "replication_outbox", "agent_calls",
              "task_outputs", "undo_points"]
    found = []
    with store._conn() as conn:
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}").fetchall():
                if any(needle in str(cell) for cell in row):
                    found.append(table)
                    break
    return found


def test_migration_0017_brings_older_boundaries_in_line(db_location: Location) -> None:
    conn = open_database(db_location)
    try:
        migrate(conn, host="h", upto=16)
        with write_transaction(conn):
            conn.execute("INSERT INTO runs (run_id, created_at_ms) VALUES ('sess-b', 1)")
            conn.execute("INSERT INTO attempts (run_id, node_id, iteration, attempt, "
                         "started_at_ms) VALUES ('sess-b', 'session', 0, 1, 1)")
            # seq 2's row renamed by a gc or forget of before; seq 1's dropped.
            conn.execute("INSERT INTO workspace_checkpoints (run_id, node_id, iteration, "
                         "attempt, host, seq, commit_id, worktree, source, request_id, "
                         "created_at_ms) VALUES ('sess-b', 'session', 0, 1, 'h', 2, $1, '/w', "
                         "'hook', 'r2', 1)", (_cid(22),))
            for seq, (call, at, commit) in enumerate([("t1", 1, _cid(1)), ("t2", 2, _cid(2)),
                                                      ("t3", 2, _cid(2))], start=1):
                conn.execute("INSERT INTO boundaries (run_id, host, seq, node_id, iteration, "
                             "attempt, request_id, tool_use_id, checkpoint_seq, commit_id, "
                             "worktree, created_at_ms) VALUES ('sess-b', 'h', $1, 'session', "
                             "0, 1, $2, $3, $4, $5, '/w', 1)",
                             (seq, f"b-{call}", call, at, commit))
            # Another machine's boundary at the same seq: its own rows decide.
            conn.execute("INSERT INTO boundaries (run_id, host, seq, node_id, iteration, "
                         "attempt, request_id, checkpoint_seq, commit_id, worktree, "
                         "created_at_ms) VALUES ('sess-b', 'other', 1, 'session', 0, 1, "
                         "'b-other', 2, $1, '/w', 1)", (_cid(2),))
        migrate(conn, host="h")
        rows = conn.execute("SELECT host, seq, commit_id FROM boundaries ORDER BY host, "
                            "seq").fetchall()
    finally:
        conn.close()
    assert [tuple(r) for r in rows] == [("h", 1, ""), ("h", 2, _cid(22)), ("h", 3, _cid(22)),
                                        ("other", 1, "")]


def _part(call: str, event: str | None = "PostToolUse", harness: str | None = "claude"
          ) -> Callable[[Connection, Recorded, str, int], None]:
    """The boundary part of a checkpoint's write (decision 0070)."""
    def part(conn: Connection, done: Recorded, host: str, now: int) -> None:
        insert_boundary(conn, host, NewBoundary(
            key=KEY, request_id=f"b-{call}", checkpoint_seq=done.seq, commit_id=done.commit_id,
            worktree="/w", harness=harness, tool_use_id=call, event=event), now)
    return part


def test_a_boundary_whose_event_is_not_text_is_recorded(db_location: Location) -> None:
    # A hook payload's event name is any JSON string (an unknown one counts
    # as a post-call event), so it may hold a lone surrogate: stored as the
    # other text of the row is (durability.store.text.to_db), not refused by
    # the driver, in the checkpoint's write and in a boundary's own.
    odd = "Post\udc80Tool"
    with Store(db_location) as store:
        store.record_checkpoint(NewCheckpoint(key=KEY, commit_id=_cid(1), worktree="/w",
                                              source="hook", request_id="r1"),
                                then=_part("t1", event=odd, harness=odd))
        record_boundaries(store, [NewBoundary(key=KEY, request_id="b-t2", checkpoint_seq=1,
                                              commit_id=_cid(1), worktree="/w", harness=odd,
                                              tool_use_id="t2", event=odd)])
        assert [c.request_id for c in store.checkpoints("sess-b")] == ["r1"]
        rows = boundaries(store, "sess-b")
    assert [(b.tool_use_id, b.checkpoint_seq) for b in rows] == [("t1", 1), ("t2", 1)]
    # PostgreSQL's text holds no such path-like bytes: escaped, as a worktree's are.
    assert {b.event for b in rows} == {read_back(to_db(odd)) if is_url(db_location) else odd}


def test_a_part_that_fails_costs_only_itself(db_location: Location) -> None:
    # Whatever the part of a checkpoint's write raises, a refusal of the
    # database (PostgreSQL's aborts the transaction until the savepoint is
    # rolled back) or a bug, its own writes are undone and the checkpoint
    # is committed; the connection writes on afterwards.
    def refused(conn: Connection, done: Recorded, host: str, now: int) -> None:
        _part("t1")(conn, done, host, now)
        conn.execute("INSERT INTO no_such_table VALUES (1)")

    def broken(conn: Connection, done: Recorded, host: str, now: int) -> None:
        _part("t2")(conn, done, host, now)
        raise ValueError("a bug in the part")

    with Store(db_location) as store:
        for n, part in ((1, refused), (2, broken), (3, _part("t3"))):
            done = store.record_checkpoint(NewCheckpoint(
                key=KEY, commit_id=_cid(n), worktree="/w", source="hook", request_id=f"r{n}"),
                then=part)
            assert (done.seq, done.commit_id) == (n, _cid(n))
        assert _named(store) == [("t3", 3, _cid(3))]
    with Store(db_location) as again:  # committed, not only seen by its own connection
        assert [c.request_id for c in again.checkpoints("sess-b")] == ["r1", "r2", "r3"]
