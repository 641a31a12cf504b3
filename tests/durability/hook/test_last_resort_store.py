"""The hook's last resort (no spool folder takes a gap: it goes straight
into the store) names the store as the settings do: a
``DURABILITY_DATABASE_URL`` that is not PostgreSQL's is refused with the
settings' own message, and the hook still exits 0 with nothing on stdout."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.helpers import run_cli


def test_a_bad_database_url_is_refused_as_the_settings_refuse_it(tmp_path: Path) -> None:
    # Both spool folders are files, so no gap can be spooled.
    home = Path(os.environ["DURABILITY_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "spool").write_text("not a folder\n")
    Path(os.environ["DURABILITY_SPOOL_DIR"]).write_text("not a folder\n")
    hook_input = json.dumps({"session_id": "sess-u", "tool_use_id": "t1",
                             "cwd": str(tmp_path / "gone")}).encode()
    done = run_cli("snapshot-hook", input=hook_input,
                   env={**os.environ, "DURABILITY_DATABASE_URL": "mysql://db/x"})
    assert (done.returncode, done.stdout) == (0, "")
    assert ("durability: could not record gap worktree-missing: DURABILITY_DATABASE_URL "
            "must be a postgresql:// URL (unset it to use state.db)\n") in done.stderr
    assert not (home / "state.db").exists()
