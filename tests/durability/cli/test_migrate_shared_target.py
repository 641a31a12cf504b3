"""``durability migrate`` never overwrites another store's rows in the target.

Found in a new user's trial of issue 15: machine A migrated its store into a
PostgreSQL database ("several machines can share one database"), then
machine B ran ``durability migrate --to`` the same URL.  Rows are upserted on
their primary keys, and the event log's key is a number each store counts
from 1: B's events replaced A's events 1-4, and only then did the
verification say ``copy-mismatch``.  Now every table is checked before
anything is written: a target holding keys the source has not, or an event
id holding another event, is a ``copy-mismatch`` that changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest

from durability.runs.run_rows import Runs
from durability.store import AttemptKey, NewCheckpoint
from tests import pg
from tests.helpers import run_cli


def _store(path: Path, run_id: str, commits: str) -> Path:
    """A SQLite store whose run ``run_id`` has one checkpoint (and one event)
    per letter of ``commits``."""
    with Runs(path) as runs:
        for i, letter in enumerate(commits):
            runs.record_checkpoint(NewCheckpoint(
                key=AttemptKey(run_id, "session", 0, 1), commit_id=letter * 40,
                worktree=f"/{run_id}", source="hook", request_id=f"{run_id}-{letter}{i}"))
    return path


def _rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(url) as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
                for table in ("events", "workspace_checkpoints", "attempts", "runs")}


@pytest.mark.parametrize("a_commits,b_commits", [("abcd", "ef"), ("ab", "efgh")],
                         ids=["target-has-more-events", "same-event-ids-other-events"])
def test_a_second_store_never_overwrites_the_first_ones_rows(
        pg_server: pg.PgServer, tmp_path: Path, a_commits: str, b_commits: str) -> None:
    url = pg_server.fresh_url()
    a = _store(tmp_path / "a.db", "run-a", a_commits)
    b = _store(tmp_path / "b.db", "run-b", b_commits)
    first = run_cli("migrate", "--to", url, "--from", str(a))
    assert first.returncode == 0, first.stderr
    before = _rows(url)
    assert len(before["events"]) == len(a_commits)

    second = run_cli("migrate", "--to", url, "--from", str(b))
    assert second.returncode == 6, (second.stdout, second.stderr)
    assert second.stderr.startswith("durability: copy-mismatch: "), second.stderr
    assert "nothing was copied" in second.stderr and second.stderr.count("\n") == 1
    assert _rows(url) == before  # A's rows exactly as they were, none of B's

    # A's own store still copies again (its earlier copy is no other store's).
    _store(a, "run-a", "z")
    again = run_cli("migrate", "--to", url, "--from", str(a))
    assert again.returncode == 0, again.stderr
    assert len(_rows(url)["events"]) == len(a_commits) + 1
