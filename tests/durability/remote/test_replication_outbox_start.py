"""The replication outbox is a table (durability/store/outbox.py): a service start
queues the checkpoints a toolkit older than that table recorded without
rows, and pushes them (docs/how-to/remote.md, "The outbox")."""

from __future__ import annotations

from pathlib import Path

from durability.config import Settings
from durability.store.database import open_database
from durability.store.db import write_transaction
from tests.durability.remote.remotekit import (
    add_remote,
    bare_remote,
    capture,
    manifest_commits,
    pushes,
    quick_states,
)
from tests.helpers import make_git_repo, start_service, wait_for


def _forget_outbox() -> None:
    """The store as an older toolkit's captures left it: checkpoints of a
    worktree with a remote, and no outbox rows."""
    conn = open_database(Settings.from_env().database)
    try:
        with write_transaction(conn):
            conn.execute("DELETE FROM replication_outbox")
    finally:
        conn.close()


def test_a_service_start_pushes_checkpoints_recorded_without_outbox_rows(
        tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    commits = [capture(repo, f"call {i}") for i in range(3)]  # no service: in-process
    _forget_outbox()
    svc = start_service(tmp_path)
    try:
        wait_for(lambda: all(s.get("backup") == "pushed" for s in quick_states()), timeout=30)
    finally:
        assert svc.stop() == 0
    assert manifest_commits(remote) == set(commits)
    assert len(pushes(remote)) == 1
