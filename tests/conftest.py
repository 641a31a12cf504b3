"""Autouse guards: a private environment per test (no writes to the real
home, state or runtime folders), jj present, and no leaked threads or
processes."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import durability.backends.git_index
from durability.config import Settings
from tests import pg
from tests.helpers import jj_path, make_jj_repo

# Every git tree an informed stage writes from its restaged paths alone is
# checked, in every test, against libgit2's write_tree of the same index.
durability.backends.git_index.CHECK_TREES = True


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``pg`` tier: every test that needs the PostgreSQL server (the
    ``db_location`` fixture's postgresql param, a test or fixture asking for
    ``pg_server``, and the whole suite under DURABILITY_TEST_DATABASE=postgresql)."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        fixtures = getattr(item, "fixturenames", ())
        if ((callspec is not None and callspec.params.get("db_location") == "postgresql")
                or "pg_server" in fixtures
                or (pg.TEST_DATABASE == "postgresql"
                    and not item.get_closest_marker("sqlite_file"))):
            item.add_marker(pytest.mark.pg)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg.PgServer]:
    """The session's throwaway PostgreSQL server (tests/pg.py), started on
    first use and stopped at the end of the session, failed or not."""
    try:
        server = pg.PgServer()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server
    server.stop()


@pytest.fixture(params=pg.backends())
def db_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """A fresh state database on each backend: a SQLite file, or a schema of
    its own on the session's PostgreSQL server."""
    if request.param == "postgresql":
        server: pg.PgServer = request.getfixturevalue("pg_server")
        return server.fresh_url()
    return tmp_path / "state.db"


@pytest.fixture(autouse=True)
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              request: pytest.FixtureRequest) -> Iterator[Path]:
    """Point every location the toolkit uses at this test's folders.

    Sockets need a short path (108 bytes on Linux), so they get their own
    folder under the temp dir rather than under ``tmp_path``.
    """
    for name in list(os.environ):
        if name.startswith(("DURABILITY_", "JJ_", "CLAUDE_")):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    sock_dir = Path(tempfile.mkdtemp(prefix="dur-"))
    jj_config = home / "jj-config.toml"
    jj_config.write_text('[user]\nname = "Test"\nemail = "test@example.invalid"\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(sock_dir))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("JJ_CONFIG", str(jj_config))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("DURABILITY_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("DURABILITY_SOCKET", str(sock_dir / "service.sock"))
    monkeypatch.setenv("DURABILITY_SPOOL_DIR", str(tmp_path / "spool"))
    monkeypatch.setenv("DURABILITY_JJ", jj_path())
    # A hook that finds no service starts one (hook/autostart.py); tests that
    # want that say so, the rest must not leave services behind.
    monkeypatch.setenv("DURABILITY_AUTOSTART", "0")
    if pg.TEST_DATABASE == "postgresql" and not request.node.get_closest_marker("sqlite_file"):
        # The whole suite on PostgreSQL: every store the toolkit opens from
        # its settings is this test's own schema.
        server: pg.PgServer = request.getfixturevalue("pg_server")
        monkeypatch.setenv("DURABILITY_DATABASE_URL", server.fresh_url())
    (home / ".gitconfig").write_text("[user]\n\tname = Test\n\temail = test@example.invalid\n")
    yield tmp_path
    shutil.rmtree(sock_dir, ignore_errors=True)


@pytest.fixture(autouse=True)
def no_thread_leaks() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = threading.Event()
    for _ in range(50):
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked:
            return
        deadline.wait(0.1)
    pytest.fail(f"threads leaked: {[t.name for t in leaked]}")


@pytest.fixture
def settings() -> Settings:
    return Settings.from_env()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A colocated jj repository with one file."""
    path = make_jj_repo(tmp_path / "repo")
    (path / "README.md").write_text("hello\n")
    return path
