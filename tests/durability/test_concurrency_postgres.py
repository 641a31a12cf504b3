"""The hook storm of test_concurrency.py with the store in PostgreSQL (issue
15): 8 hook processes x 6 calls through the service, which records every
capture in PostgreSQL.  Every call is answered, seqs are contiguous, nothing
is lost.  Many connections writing at once are covered by the store tests
(``db_location``); with ``DURABILITY_TEST_DATABASE=postgresql`` the whole
suite, the storm without a service included, runs on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.config import Settings
from tests import pg
from tests.durability.test_concurrency import CALLS, WORKERS, _check_store, _hammer
from tests.helpers import ping, start_service

pytestmark = pytest.mark.slow


def test_eight_hook_processes_with_the_service_on_postgresql(
        repo: Path, tmp_path: Path, pg_server: pg.PgServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABILITY_DATABASE_URL", pg_server.fresh_url())
    settings = Settings.from_env()
    service = start_service(tmp_path)  # inherits the URL
    try:
        _hammer(repo)
        answer = ping(settings.socket_path) or {}
    finally:
        service.stop()
    rows = _check_store(repo, settings)
    assert answer.get("requests", 0) >= WORKERS * CALLS
    assert 1 <= rows <= answer["captures"] <= WORKERS * CALLS
