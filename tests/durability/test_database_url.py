"""DURABILITY_DATABASE_URL from the command line's side: a URL that is not
PostgreSQL's is refused as invalid, an unreachable server is one
store-unavailable line that never shows the password, and a reachable one is
the store every command uses."""

from __future__ import annotations

import os
from pathlib import Path

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
