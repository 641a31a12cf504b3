"""A service whose state file is deleted under it records into the new one.

The service holds one SQLite connection for its life.  Found in a new user's
trial: after `rm ~/.local/state/durability/state.db*` (a reset, with the
service running in the background unnoticed), every later hook capture was
recorded into the deleted file's inode, which nothing else can read: `log`,
`snapshots` and `restore` knew nothing of them, no gap said so, and doctor
said the state and the service were ok.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from durability.config import Settings
from tests.durability.hook.test_entry import run_hook
from tests.helpers import cli, hook_payload, make_git_repo, start_service


def _delete_state(settings: Settings) -> None:
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (settings.state_dir / name).unlink(missing_ok=True)


def test_captures_after_the_state_file_is_deleted_are_on_record(tmp_path: Path) -> None:
    settings = Settings.from_env()
    repo = make_git_repo(tmp_path / "repo").resolve()
    service = start_service(tmp_path)
    try:
        (repo / "a.txt").write_text("1\n")
        run_hook(hook_payload(repo, session_id="reset", tool_use_id="toolu_1",
                              file_path=str(repo / "a.txt")))
        _delete_state(settings)
        (repo / "a.txt").write_text("2\n")
        run_hook(hook_payload(repo, session_id="reset", tool_use_id="toolu_2",
                              file_path=str(repo / "a.txt")))
        listed = cli("snapshots", "reset", "--json")
    finally:
        service.stop()
    assert listed.returncode == 0, listed.stderr
    assert [r["tool_use_id"] for r in json.loads(listed.stdout)] == ["toolu_2"]
    assert os.path.exists(settings.state_dir / "state.db")
