"""A push is believed only when the remote shows what it took, and a stopping
service leaves no push behind (docs/how-to/remote.md): bare file:// remotes whose
hooks delete what they accept or hang on a fifo this test owns, the real
replicator and the installed service."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from durability.config import Settings
from durability.remote.replicator import Replicator
from durability.store import Store
from tests.durability.remote.remotekit import (
    add_remote,
    bare_remote,
    capture,
    cli,
    quick_states,
    remote_refs,
)
from tests.helpers import make_git_repo, make_jj_repo, start_service, wait_for, write_script


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_remote_whose_hook_deletes_what_it_took_is_not_believed(
        kind: str, tmp_path: Path) -> None:
    repo = (make_jj_repo if kind == "jj" else make_git_repo)(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    write_script(remote / "hooks" / "post-receive",
                 "#!/bin/sh\nwhile read old new ref; do git update-ref -d \"$ref\"; done\n")
    add_remote(repo, "backup", remote.as_uri())
    capture(repo, "one")
    capture(repo, "two")
    settings = replace(Settings.from_env(), replication_bound_ms=0)
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() == 0
    assert remote_refs(remote) == {}
    assert quick_states() == [{"backup": "failed"}] * 2  # never `pushed`: gc keeps them
    gaps = json.loads(cli("gaps", "run-r", "--json").stdout)
    assert [g["reason"] for g in gaps] == ["replication-failed"] * 2
    assert "does not hold" in gaps[0]["detail"]
    # The same remote without the hook: the retry is believed.
    (remote / "hooks" / "post-receive").unlink()
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() == 2
    assert quick_states() == [{"backup": "pushed"}] * 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stop_kills_a_push_hanging_on_the_remote(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    fifo = tmp_path / "gate.fifo"
    os.mkfifo(fifo)
    pid_file = tmp_path / "hook.pid"
    # The hook says who it is, then waits for a writer on the fifo: forever.
    write_script(remote / "hooks" / "pre-receive",
                 f"#!/bin/sh\ncat > /dev/null\necho $$ > {pid_file}\nread x < {fifo}\n")
    add_remote(repo, "backup", remote.as_uri())
    svc = start_service(tmp_path)
    hook = 0
    try:
        capture(repo, "pushed into a hanging remote")
        wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=60)
        hook = int(pid_file.read_text())
        assert _alive(hook)
    finally:
        assert svc.stop() == 0
    try:
        wait_for(lambda: not _alive(hook), timeout=5)
        assert quick_states() == [{"backup": "pending"}]  # pushed again by the next service
    finally:
        assert stat.S_ISFIFO(fifo.stat().st_mode)
        try:  # whatever happened, let a hook still waiting go
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"go\n")
            os.close(fd)
        except OSError:
            pass
