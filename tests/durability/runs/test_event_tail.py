"""The newest events of a run with its total (``Runs.newest_events``), which
the MCP ``logs`` tool answers with: a bounded tail of a long log, in log
order, counting only that run's events."""

from __future__ import annotations

from pathlib import Path

from durability.runs.run_rows import Runs
from durability.store.db import connect, migrate, write_transaction
from durability.store.events import append


def _log(db: Path, run_id: str, n: int) -> None:
    conn = connect(db)
    try:
        migrate(conn)
        with write_transaction(conn):
            for i in range(n):
                append(conn, run_id, "checkpoint", 1_000 + i, node_id="session", seq=i + 1)
    finally:
        conn.close()


def test_newest_events_are_the_tail_in_log_order_with_the_total(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _log(db, "a", 5)
    _log(db, "b", 2)  # another run's events are neither listed nor counted
    _log(db, "a", 1)
    with Runs(db) as runs:
        tail, total = runs.newest_events("a", 3)
        assert total == 6 and [e.seq for e in tail] == [4, 5, 1]
        assert [e.id for e in tail] == sorted(e.id for e in tail)
        whole, total = runs.newest_events("a", 100)
        assert total == 6 and whole == runs.events("a")  # the same rows `logs` prints
        assert runs.newest_events("nobody", 10) == ([], 0)
