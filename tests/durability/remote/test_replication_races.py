"""Replication racing the user and failing halfway (docs/how-to/remote.md): a remote
removed while a push to it is under way, a push of several batches whose
later batch is refused.  Real git repositories, file:// remotes whose hooks
hold or refuse pushes, the installed CLI and service."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.remote import replicator
from durability.remote.replicator import Replicator
from durability.store import Store
from tests.durability.remote.remotekit import (
    add_remote,
    bare_remote,
    capture,
    cli,
    manifest_commits,
    quick_states,
)
from tests.helpers import make_git_repo, start_service, wait_for, write_script


def _push_started(remote: Path) -> bool:
    """Whether a push is inside the remote (its objects are in git's
    quarantine folder while the pre-receive hook runs)."""
    return any((remote / "objects").glob("*incoming-*"))


@pytest.mark.slow
def test_a_remote_replaced_while_a_push_to_it_hangs_gets_everything(tmp_path: Path) -> None:
    """`remote remove backup` then `remote add backup OTHER` while a push to
    the first one is under way: when that push ends, its record must not
    count for the new remote of the same name, which gets the checkpoint."""
    repo = make_git_repo(tmp_path / "repo")
    old = bare_remote(tmp_path / "old.git")
    new = bare_remote(tmp_path / "new.git")
    gate = tmp_path / "gate"
    gate.touch()
    write_script(old / "hooks" / "pre-receive",
                 f"#!/bin/sh\ncat > /dev/null\nwhile [ -e {gate} ]; do sleep 0.05; done\n")
    add_remote(repo, "backup", old.as_uri())
    svc = start_service(tmp_path)
    try:
        commit = capture(repo, "pushed while the remote changes")
        wait_for(lambda: _push_started(old), timeout=60)
        assert cli("remote", "remove", "backup", "--worktree", str(repo)).returncode == 0
        add_remote(repo, "backup", new.as_uri())
        gate.unlink()
        wait_for(lambda: commit in manifest_commits(new), timeout=30)
        wait_for(lambda: quick_states() == [{"backup": "pushed"}], timeout=60)
    finally:
        gate.unlink(missing_ok=True)
        assert svc.stop() == 0


def test_a_push_refused_halfway_files_gaps_only_for_what_is_not_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backlog pushed in batches whose second batch the remote refuses,
    past the bound: the first batch is on the remote and stays ``pushed``
    with no gap; only the refused checkpoint is a replication-failed gap."""
    from dataclasses import replace

    repo = make_git_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    # The remote takes one push, then refuses every later one.
    write_script(remote / "hooks" / "pre-receive",
                 f"#!/bin/sh\ncat > /dev/null\n[ ! -e {remote}/took-one ] || exit 1\n"
                 f"touch {remote}/took-one\n")
    add_remote(repo, "backup", remote.as_uri())
    first = capture(repo, "first")
    capture(repo, "second")
    monkeypatch.setattr(replicator, "MAX_BATCH", 1)
    settings = replace(Settings.from_env(), replication_bound_ms=0)
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() == 1
    assert first in manifest_commits(remote)
    assert quick_states() == [{"backup": "pushed"}, {"backup": "failed"}]
    gaps = json.loads(cli("gaps", "run-r", "--json").stdout)
    assert [g["reason"] for g in gaps] == ["replication-failed"]
    assert "seq 2 " in gaps[0]["detail"]


def test_a_checkpoint_whose_pin_is_gone_does_not_hold_back_the_others(tmp_path: Path) -> None:
    """One checkpoint of the outbox lost its pin (a ref deleted by hand, a
    collector): the checkpoints after it are pushed all the same, and only
    the one that cannot be is a replication-failed gap (past the bound)."""
    from dataclasses import replace

    from tests.helpers import git, make_jj_repo

    repo = make_jj_repo(tmp_path / "repo")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    lost = capture(repo, "its pin is deleted")
    kept = [capture(repo, f"call {i}") for i in range(2)]
    git(repo, "update-ref", "-d", f"refs/durability/jj/{lost}")
    settings = replace(Settings.from_env(), replication_bound_ms=0)
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() == 2
    assert manifest_commits(remote) == set(kept)
    assert quick_states() == [{"backup": "failed"}, {"backup": "pushed"}, {"backup": "pushed"}]
    gaps = json.loads(cli("gaps", "run-r", "--json").stdout)
    assert [g["reason"] for g in gaps] == ["replication-failed"]
    assert "seq 1 " in gaps[0]["detail"] and "pin" in gaps[0]["detail"]


# test_two_services_on_one_state_store_push_a_checkpoint_once: in
# test_replicator_timer.py, as two replicators of one state store, the second
# moved past its poked pass and an idle look while the first one's push hangs.
