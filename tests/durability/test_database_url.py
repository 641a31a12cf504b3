"""DURABILITY_DATABASE_URL from the command line's side: a URL that is not
PostgreSQL's is refused as invalid, an unreachable server is one
store-unavailable line that never shows the password, and a reachable one is
the store every command uses."""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

import pytest

from durability.store import Store
from tests import pg
from tests.helpers import cli


def test_a_url_that_is_not_postgresql_is_invalid() -> None:
    done = cli("sessions", env={**os.environ, "DURABILITY_DATABASE_URL": "mysql://db/x"})
    assert done.returncode == 2
    assert done.stderr == ("durability: invalid-value: DURABILITY_DATABASE_URL must be a "
                           "postgresql:// URL (unset it to use state.db)\n")


def test_an_unreachable_server_is_one_line_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://me:s3cret@/db?host={tmp_path}/nowhere&connect_timeout=2"
    done = cli("sessions", env={**os.environ, "DURABILITY_DATABASE_URL": url})
    assert done.returncode == 6, done.stderr
    assert done.stderr.startswith("durability: store-unavailable: cannot connect to "
                                  "postgresql://me:***@/db"), done.stderr
    assert done.stderr.count("\n") == 1 and "s3cret" not in done.stderr


def test_every_command_uses_the_database_the_url_names(repo: Path,
                                                        pg_server: pg.PgServer) -> None:
    env = {**os.environ, "DURABILITY_DATABASE_URL": pg_server.fresh_url()}
    done = cli("snapshot", str(repo), "--run", "r-url", "--node", "n", env=env)
    assert done.returncode == 0, done.stderr
    listed = cli("sessions", env=env)
    assert "r-url" in listed.stdout, listed
    assert not (Path(os.environ["DURABILITY_HOME"]) / "state.db").exists()
    # Without the URL, the SQLite store knows nothing of it.
    assert "r-url" not in cli("sessions").stdout


def test_a_hook_gap_no_spool_folder_took_lands_in_postgresql(
        pg_server: pg.PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The hook's last resort (every spool folder unusable) writes the gap
    # straight into the store: the one the URL names, not state.db.
    url = pg_server.fresh_url()
    monkeypatch.setenv("DURABILITY_DATABASE_URL", url)
    folders = [Path(os.environ["DURABILITY_SPOOL_DIR"]),
               Path(os.environ["DURABILITY_HOME"]) / "spool"]
    nobody = pwd.getpwnam("nobody")
    for folder in folders:
        folder.mkdir(mode=0o700, parents=True)
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    try:
        payload = json.dumps({"session_id": "sess-u", "tool_use_id": "t1",
                              "cwd": "/nonexistent-durability-test"})
        done = cli("snapshot-hook", input=payload)
        assert (done.returncode, done.stdout) == (0, "")
        assert "could not record" not in done.stderr, done.stderr
    finally:
        for folder in folders:
            os.chown(folder, 0, 0)
    with Store(url) as store:
        assert [g.reason for g in store.gaps("sess-u")] == ["worktree-missing"]
    assert not (Path(os.environ["DURABILITY_HOME"]) / "state.db").exists()
