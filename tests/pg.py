"""The test suite's throwaway PostgreSQL server, and a fresh database per test.

One server per pytest session, started on first use by ``scripts/
postgres-server.sh`` (initdb and pg_ctl in a temporary folder, on a Unix
socket, fsync off) and stopped when the session ends, failed or not.  Each
test gets its own schema in it: a URL whose ``search_path`` is that schema,
so tests never see each other's rows and no database is created per test.

``DURABILITY_TEST_DATABASE`` chooses what the store tests run on: unset, the
parametrised ones run on both SQLite and PostgreSQL and the rest on SQLite;
``postgresql`` runs everything on PostgreSQL (every test's
``DURABILITY_DATABASE_URL`` is a fresh schema); ``sqlite`` runs nothing on
PostgreSQL.  A test that needs PostgreSQL fails when it cannot be started;
it never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from urllib.parse import quote

from durability.config import Settings
from durability.store import Store

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "postgres-server.sh"

#: Read once, before the per-test guard clears every DURABILITY_* variable.
TEST_DATABASE = os.environ.get("DURABILITY_TEST_DATABASE", "").strip().lower() or "both"
if TEST_DATABASE not in ("both", "sqlite", "postgresql"):
    raise RuntimeError(f"DURABILITY_TEST_DATABASE must be sqlite or postgresql, "
                       f"not {TEST_DATABASE!r}")


def existing_store() -> Store | None:
    """The store the toolkit's settings name, or None while its SQLite file
    does not exist (opening it would create it)."""
    settings = Settings.from_env()
    if settings.database_url is None and not settings.db_path.exists():
        return None
    return Store(settings.database)


def backends() -> list[str]:
    """The backends a parametrised store test runs on."""
    return {"both": ["sqlite", "postgresql"], "sqlite": ["sqlite"],
            "postgresql": ["postgresql"]}[TEST_DATABASE]


class PgServer:
    """A running throwaway server; ``stop`` removes it and its folder."""

    def __init__(self, *, fast: bool = True) -> None:
        self._top = Path(tempfile.mkdtemp(prefix="dur-pg-"))
        # The server runs as another user (root cannot run postgres): it must
        # reach its folder inside this one.
        os.chmod(self._top, 0o711)
        self.dir = self._top / "pg"
        argv = ["sh", str(SCRIPT), "start", str(self.dir)] + (["fast"] if fast else [])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            shutil.rmtree(self._top, ignore_errors=True)
            raise RuntimeError(f"cannot start PostgreSQL for the tests "
                               f"(scripts/install-postgres.sh installs it): {done.stderr.strip()}")
        #: the server's own database, as its superuser
        self.url = done.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        subprocess.run(["sh", str(SCRIPT), "stop", str(self.dir)], capture_output=True,
                       timeout=60, check=False)
        shutil.rmtree(self._top, ignore_errors=True)

    def fresh_url(self) -> str:
        """A URL of a new, empty schema of its own."""
        import psycopg

        schema = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        return f"{self.url}&options={quote(f'-c search_path={schema}')}"
