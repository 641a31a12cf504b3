"""``durability migrate`` with the service still running says so.

Found in a new user's trial of issue 15: migrate copied the store while the
service (which keeps writing checkpoints into the SQLite store) ran, and said
nothing; the docs ask to stop it first, and a checkpoint written after its
table was copied is left behind once DURABILITY_DATABASE_URL is set.  The copy
still succeeds; a one-line note on stderr names the running service and what
to do.
"""

from __future__ import annotations

from pathlib import Path

from durability.config import Settings
from durability.runs.run_rows import Runs
from durability.store import AttemptKey, NewCheckpoint
from tests import pg
from tests.helpers import cli, run_cli, start_service


def test_migrate_notes_a_running_service_and_is_quiet_without_one(
        pg_server: pg.PgServer, tmp_path: Path) -> None:
    with Runs(Settings.from_env().db_path) as runs:
        runs.record_checkpoint(NewCheckpoint(key=AttemptKey("r", "n", 0, 1), commit_id="a" * 40,
                                             worktree="/w", source="hook", request_id="q1"))
    url = pg_server.fresh_url()
    quiet = run_cli("migrate", "--to", url)
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    service = start_service(tmp_path)
    try:
        # The installed command, not run_cli: a migrate beside a live service is
        # two processes, and one run in this test's process once kept the
        # service from stopping on SIGTERM (CI, under load).
        noted = cli("migrate", "--to", url, "--json")
    finally:
        service.stop()
    assert noted.returncode == 0, noted.stderr
    lines = noted.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("durability: note: the service (pid "), lines
    assert "durability stop" in lines[0] and "again" in lines[0]
