"""The undo points restores named (durability/store/gc_rows.py, migration 0014): recorded
with the store's clock, read with the rows gc judges, a later naming moves
the time on, dropped with their row, and the migration names every
pre-restore checkpoint an older toolkit recorded.  SQLite and PostgreSQL."""

from __future__ import annotations

from durability.store import AttemptKey, NewCheckpoint, Store
from durability.store.clock import ManualClock
from durability.store.database import Location, is_url, open_database
from durability.store.db import migrations, write_transaction
from durability.store.gc_rows import apply, record_undo_point, retention_rows

KEY = AttemptKey("run-u", "node", 0, 1)
VERSION = 14


def _record(store: Store, n: int, source: str = "hook") -> None:
    store.record_checkpoint(NewCheckpoint(key=KEY, commit_id=f"{n:040x}", worktree="/w",
                                          source=source, request_id=f"r{n}"))


def _named(store: Store) -> dict[int, int | None]:
    return {r.checkpoint.seq: r.undo_named_at_ms for r in retention_rows(store)}


def test_an_undo_point_is_read_with_its_row_and_named_again_later(
        db_location: Location) -> None:
    clock = ManualClock(1_000_000)
    with Store(db_location, clock=clock) as store:
        for n in (1, 2, 3):
            _record(store, n)
        record_undo_point(store, KEY, 2)
        assert _named(store) == {1: None, 2: 1_000_000, 3: None}
        clock.advance(5_000)
        record_undo_point(store, KEY, 2)
        assert _named(store) == {1: None, 2: 1_005_000, 3: None}
        assert apply(store, [store.checkpoint(KEY, 2)]).dropped == 1
        _record(store, 4)
        with store._conn() as conn:
            left = conn.execute("SELECT COUNT(*) FROM undo_points").fetchone()[0]
        assert left == 0


def test_the_migration_names_the_pre_restore_checkpoints_already_recorded(
        db_location: Location) -> None:
    clock = ManualClock(2_000_000)
    with Store(db_location, clock=clock) as store:
        _record(store, 1)
        clock.advance(10)
        _record(store, 2, source="pre-restore")
        _record(store, 3)
    before = max(v for v, _, _ in migrations() if v < VERSION)
    conn = open_database(db_location)
    try:
        with write_transaction(conn):
            conn.execute("DROP TABLE undo_points")
            # And what the migrations after it made (0016), made again below.
            conn.execute("DROP TABLE agent_blocks")
            conn.execute("DROP TABLE agent_calls")
            conn.execute("ALTER TABLE workspace_checkpoints DROP COLUMN session_id")
            conn.execute("ALTER TABLE attempts DROP COLUMN harness")
            conn.execute("ALTER TABLE attempts DROP COLUMN session_id")
            if is_url(db_location):
                conn.execute("DELETE FROM durability_schema WHERE version >= $1", (VERSION,))
            else:
                conn.execute(f"PRAGMA user_version={before}")
    finally:
        conn.close()
    with Store(db_location) as store:  # migrates
        assert _named(store) == {1: None, 2: 2_000_010, 3: None}
