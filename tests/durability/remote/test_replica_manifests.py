"""Each state store writes manifests of its own (docs/how-to/remote.md): machines
that clone a project to the same path and name the same remote (a fleet of
containers) never push over each other's list.  Real git repositories,
file:// remotes, the replicator run in this process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.remote import manifest
from durability.remote.replicator import Replicator
from durability.store import AttemptKey, Store
from tests.durability.remote.remotekit import (
    add_remote,
    bare_remote,
    capture,
    manifest_commits,
    own_store,
    states,
)
from tests.helpers import git, make_git_repo


def _push_all() -> None:
    settings = Settings.from_env()
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() > 0


def test_two_machines_with_the_same_worktree_path_both_replicate(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet of containers each cloning the project to the same path (say
    /workspace) and naming the same remote: each machine's manifest is its
    own on the remote, so the second machine's pushes are not refused as a
    non-fast-forward of the first's."""
    origin = make_git_repo(tmp_path / "origin")
    remote = bare_remote(tmp_path / "backup.git")
    work = tmp_path / "workspace"
    made = {}
    for machine in ("a", "b"):
        state = tmp_path / f"machine-{machine}"
        monkeypatch.setenv("DURABILITY_HOME", str(state / "state"))
        monkeypatch.setenv("DURABILITY_SPOOL_DIR", str(state / "spool"))
        for name, value in own_store(dict(os.environ)).items():
            monkeypatch.setenv(name, value)  # each machine its own store
        if work.exists():
            work.rename(tmp_path / "workspace-of-a")
        git(tmp_path, "clone", "-q", str(origin), str(work))
        add_remote(work, "backup", remote.as_uri())
        key = AttemptKey(f"run-{machine}", "agent", 0, 1)
        made[key.run_id] = capture(work, f"on {machine}", key=key)
        _push_all()
        assert states(key.run_id) == [{"backup": "pushed"}]
    assert manifest_commits(remote) == set(made.values())


def test_the_replica_id_is_made_once_and_kept(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = manifest.replica_id(state)
    assert manifest.replica_id(state) == first
    assert manifest.replica_id(tmp_path / "other-state") != first
    (state / "replica-id").write_text("not an id\n")  # damaged: a new one replaces it
    fresh = manifest.replica_id(state)
    assert fresh != first and manifest.replica_id(state) == fresh
    assert [p.name for p in state.iterdir()] == ["replica-id"]  # no draft left behind
