"""A NUL in a hook payload, with the state in PostgreSQL (whose text holds
no NUL): each call leaves its one record, and the gaps of every run are
still listed, those filed later included.  Real parts: the installed hook
(its in-process fallback), the session's throwaway PostgreSQL server, real
jj; a stand-in jj (too old) only for the gaps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import pg
from tests.durability.hook.test_entry import checkpoints, fake_jj, one_gap, run_hook
from tests.helpers import hook_payload, run_cli_json

NUL = "x\x00y"


@pytest.fixture
def on_postgresql(pg_server: pg.PgServer, monkeypatch: pytest.MonkeyPatch) -> str:
    url = pg_server.fresh_url()
    monkeypatch.setenv("DURABILITY_DATABASE_URL", url)
    return url


@pytest.mark.parametrize("field", ["tool_use_id", "tool_name", "file_path"])
def test_a_nul_in_a_payload_field_leaves_one_record_and_the_listings_intact(
        field: str, on_postgresql: str, repo: Path, tmp_path: Path) -> None:
    session = f"sess-nul-{field}"
    (repo / "f.txt").write_text("v1\n")
    values = {"tool_use_id": "toolu_nul", "tool_name": "Write", "file_path": str(repo / "f.txt")}
    values[field] = f"{values[field]}{NUL}"
    run_hook(hook_payload(repo, session_id=session, **values), timeout=60,
             env={"DURABILITY_HOOK_TIMEOUT_MS": "10000"})
    rows, gaps = checkpoints(session), run_cli_json("gaps", session)
    assert (len(rows), gaps) == (1, [])
    if field == "tool_use_id":
        assert rows[0].tool_use_id == values["tool_use_id"]  # as it came, NUL included
    # A gap with the NUL, and one filed later in another run: both listed.
    failing = fake_jj(tmp_path, 'echo "jj 0.20.0"\n')  # too old: a gap, never a capture
    (repo / "f.txt").write_text("v2\n")
    run_hook(hook_payload(repo, session_id=session, tool_use_id=f"toolu_2{NUL}"), timeout=60,
             env={"DURABILITY_JJ": str(failing)})
    assert one_gap(session, "jj-too-old")["tool_use_id"] == f"toolu_2{NUL}"
    run_hook(hook_payload(repo, session_id="sess-later", tool_use_id="toolu_3"), timeout=60,
             env={"DURABILITY_JJ": str(failing)})
    assert one_gap("sess-later", "jj-too-old")["tool_use_id"] == "toolu_3"
    assert len(checkpoints(session)) == 1
