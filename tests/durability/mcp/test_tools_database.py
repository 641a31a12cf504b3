"""The MCP tools that read engine tables of their own (``logs``: runs and
events, ``remotes``: remotes and replication) read the store the settings
name: with ``DURABILITY_DATABASE_URL`` set, the PostgreSQL store, never a
``state.db`` beside it.  Called in-process on a real git repository and a
real PostgreSQL server (``pg_server`` fails, never skips, without one)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.mcp import models as m
from durability.mcp import tools
from durability.store import AttemptKey
from durability.store.remote_rows import Remotes
from tests import pg
from tests.helpers import make_git_repo


def test_logs_and_remotes_read_the_postgresql_store(
        tmp_path: Path, pg_server: pg.PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABILITY_DATABASE_URL", pg_server.fresh_url())
    settings = Settings.from_env()
    repo = make_git_repo(tmp_path / "ours").resolve()
    for i in range(2):
        (repo / "README.md").write_text(f"version {i}\n")
        done = snapshot_now(settings, key=AttemptKey("ra", "session", 0, 1), path=repo,
                            request_id=str(uuid.uuid4()))
        assert done.commit_id is not None and not done.deduped
    Remotes(settings.database).add(str(repo), "backup", (tmp_path / "backup.git").as_uri())
    here = tools.Here(settings=settings, cwd=repo)

    logs = tools.logs(here, m.LogsIn(run_id="ra"))
    assert logs.run_id == "ra" and logs.total == 2 and len(logs.events) == 2

    remotes = tools.remotes(here, m.RemotesIn())
    assert remotes.checkpoints == 2
    assert [(r.name, r.pushed, r.pending) for r in remotes.remotes] == [("backup", 0, 2)]
    assert not settings.db_path.exists()  # nothing went to a SQLite file instead
