"""``durability migrate --to postgresql://...`` (issue 15): a SQLite store with
rows in every table is copied into PostgreSQL, verified, and can be copied
again; a target that holds other rows is a copy-mismatch."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from durability.config import Settings
from durability.runs.agent_rows import complete_call, record_block, record_session
from durability.runs.fence import Owner
from durability.runs.run_rows import Runs
from durability.store import AttemptKey, Gap, NewCheckpoint
from durability.store.boundaries import NewBoundary, record_boundaries
from durability.store.gc_rows import record_undo_point
from durability.store.remote_rows import Remotes
from durability.store.watch_rows import Watches, WatchRow
from tests import pg
from tests.helpers import run_cli

KEY = AttemptKey("hook-run", "main", 0, 1)


def _fill(path: Path) -> None:
    """A row in every table, through the store's own calls."""
    with Runs(path) as runs:
        claim = runs.create_run("eng", owner=Owner("o", 1, "h"), workflow_path="/wf.py",
                                repo_root="/r", worktree="/w", metadata_json="{}",
                                plan_json='[{"id": "t1"}]', limits_json="{}")
        key = runs.begin_attempt(claim, "t1", 0, "/w")
        # An agent attempt's session, a completed call and a quota block.
        record_session(runs, claim, key, "claude", "s-1")
        complete_call(runs, claim, key, "s-1", "toolu_1", "Bash")
        record_block(runs, claim, key, "claude", 5_000, "usage limit")
        runs.complete_attempt(claim, key, '{"n": 1}')
        runs.decide("eng", "t1", "approved", "ok")
        runs.add_usage("eng", turns=1, tokens=10, cost=0.25)
        for i, commit in enumerate("ab"):
            runs.record_checkpoint(NewCheckpoint(key=KEY, commit_id=commit * 40, worktree="/w",
                                                 source="hook", request_id=f"q{i}",
                                                 label="Write x.py"))
        runs.add_gaps([Gap(ts_ms=5, run_id="hook-run", request_id="g1", reason="jj-failed",
                           detail="boom")])
        record_undo_point(runs, KEY, 1)  # a restore named seq 1 as its undo
        record_boundaries(runs, [NewBoundary(key=KEY, request_id="q0", checkpoint_seq=1,
                                             commit_id="a" * 40, worktree="/w",
                                             harness="claude", tool_use_id="toolu_1",
                                             tool_name="Bash", event="PostToolUse")])
    Watches(path).put(WatchRow("/w", KEY, 100, 1000, poll=True))
    remotes = Remotes(path)
    remotes.add("/w", "backup", "file:///srv/backup.git")
    remotes.mark(remotes.pending()[:1], "pushed")
    # An isolated worktree and a fork need a real repository to be made
    # through their own calls: their rows are written as those calls write them.
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute("INSERT INTO task_worktrees VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         ("eng", "t1", 0, "/iso", "git", "/w", "c" * 40, "iso", "removed", 1, 2))
            conn.execute("INSERT INTO run_forks VALUES (?,?,?,?,?,?,?,?,?)",
                         ("eng-fork", "eng", "t1", 0, 1, 1, "a" * 40, 1, 3))
    finally:
        conn.close()


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")}
    finally:
        conn.close()


def test_migrate_copies_every_table_verified_and_again_idempotently(
        pg_server: pg.PgServer) -> None:
    source = Settings.from_env().db_path
    _fill(source)
    url = pg_server.fresh_url()

    done = run_cli("migrate", "--to", url, "--from", str(source), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert list(report) == ["to", "tables", "verified"]  # the wire format, in order
    assert all(list(t) == ["table", "source_rows", "target_rows"] for t in report["tables"])
    counts = {t["table"]: t["target_rows"] for t in report["tables"]}
    assert set(counts) == _tables(source)  # every table, whatever migrations made them
    assert all(n > 0 for n in counts.values()), counts
    assert all(t["source_rows"] == t["target_rows"] for t in report["tables"])
    assert report["verified"] is True

    with Runs(source) as a, Runs(url) as b:
        assert b.checkpoints("hook-run") == a.checkpoints("hook-run")
        assert b.gaps("hook-run") == a.gaps("hook-run")
        assert b.attempts("eng") == a.attempts("eng")
        assert b.get_run("eng") == a.get_run("eng")
        assert b.run_state("eng") == a.run_state("eng")
        assert b.usage("eng") == a.usage("eng")
        assert b.sessions() == a.sessions()
    assert Watches(url).all() == Watches(source).all()

    # Again, after the source moved on: what changed is copied, nothing twice.
    with Runs(source) as runs:
        runs.record_checkpoint(NewCheckpoint(key=KEY, commit_id="c" * 40, worktree="/w",
                                             source="hook", request_id="q9"))
    again = run_cli("migrate", "--to", url, "--from", str(source))
    assert again.returncode == 0, again.stderr
    assert "workspace_checkpoints: 3 rows" in again.stdout
    with Runs(url) as runs:
        assert [c.seq for c in runs.checkpoints("hook-run")] == [1, 2, 3]
        # The copy is a working store: the next capture continues the seq.
        assert runs.record_checkpoint(NewCheckpoint(
            key=KEY, commit_id="d" * 40, worktree="/w", source="hook", request_id="q10")).seq == 4


def test_a_target_holding_other_rows_is_a_copy_mismatch(pg_server: pg.PgServer) -> None:
    source = Settings.from_env().db_path
    _fill(source)
    url = pg_server.fresh_url()
    with Runs(url) as runs:
        runs.add_gaps([Gap(ts_ms=9, run_id="elsewhere", request_id="other", reason="timeout")])
    done = run_cli("migrate", "--to", url)
    assert done.returncode == 6, (done.stdout, done.stderr)
    # Refused before anything is written (test_migrate_shared_target.py): the
    # other gap, and the event it logged, are the target's own.
    assert done.stderr.startswith("durability: copy-mismatch: table events: the target "
                                  "holds 1 rows that are not this store's"), done.stderr
    assert "nothing was copied" in done.stderr


def test_migrate_refuses_a_target_that_is_not_postgresql() -> None:
    done = run_cli("migrate", "--to", "sqlite:///x.db")
    assert done.returncode == 2
    assert done.stderr == "durability: invalid-value: --to must be a postgresql:// URL\n"
