"""The hook's in-process fallback with the state in PostgreSQL (issue 15).

Opening a PostgreSQL store costs the hook psycopg's import (0.3-1.1 s on this
machine) on top of the connection.  jj's timeout used to be fixed before
that, so a hanging jj outlasted the budget and the watchdog filed a
`timeout` gap in place of the `jj-timeout` the capture would have filed.
Real parts: the installed hook, the session's throwaway PostgreSQL server,
a stand-in jj (its discovery is a boundary this project owns).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import pg
from tests.durability.hook.test_entry import ANSWERS_VERSION, checkpoints, hang_jj, run_hook
from tests.helpers import hook_payload

pytestmark = pytest.mark.timing


@pytest.fixture
def on_postgresql(pg_server: pg.PgServer, monkeypatch: pytest.MonkeyPatch) -> str:
    url = pg_server.fresh_url()
    monkeypatch.setenv("DURABILITY_DATABASE_URL", url)
    return url


def test_a_hanging_jj_on_postgresql_is_a_jj_timeout_gap_within_the_budget(
    on_postgresql: str, repo: Path, tmp_path: Path
) -> None:
    # 4 s, not 2: before jj starts, the fallback imports psycopg and creates the
    # fresh schema's tables; on a loaded machine that outlasted jj's share of a
    # 2 s budget, and the call was the watchdog's timeout (1 of 20 loaded runs).
    hang_jj(repo, tmp_path, "sess-pg-hang", version=ANSWERS_VERSION, budget_ms=4000,
            reason="jj-timeout")


def test_the_fallback_on_postgresql_records_its_checkpoint_there(
    on_postgresql: str, repo: Path
) -> None:
    (repo / "f.txt").write_text("v1\n")
    run_hook(hook_payload(repo, session_id="sess-pg-ok", tool_use_id="toolu_pg"), timeout=60,
             env={"DURABILITY_HOOK_TIMEOUT_MS": "10000"})
    [row] = checkpoints("sess-pg-ok")
    assert (row.seq, row.tool_use_id, row.worktree) == (1, "toolu_pg", str(repo))
    # Not in a SQLite file beside it.
    assert not (Path(os.environ["DURABILITY_HOME"]) / "state.db").exists()
