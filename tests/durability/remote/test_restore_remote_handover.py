"""Handing a run over to another machine with ``restore --from-remote`` does
not break the first machine's backups (issue 15, docs/how-to/remote.md).

The pre-restore checkpoint of a ``--from-remote`` restore goes on a run of
its own, never into the restored run's chain: once machine B's service has
pushed it, machine A's later checkpoints of the same attempt still land on
the remote, a second ``--from-remote`` on B restores A's newest seq, and B's
undo (as printed, human and ``--json``) names that run.

Two machines: A is this process's state folder, B another state folder (and
store, under PostgreSQL) with its own socket and spool; a ``file://`` bare
remote; the installed service replicating on both; the installed CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.remote.replicator import Replicator
from durability.store import Store
from tests.durability.remote.remotekit import (
    KEY,
    add_remote,
    bare_remote,
    capture,
    manifest_commits,
    own_store,
    quick_states,
)
from tests.helpers import (
    cli,
    git,
    make_git_repo,
    make_jj_repo,
    start_service,
    tree_manifest,
    wait_for,
)


def _machine_b(tmp_path: Path) -> dict[str, str]:
    other = tmp_path / "machine-b"
    other.mkdir()
    return own_store({**os.environ, "DURABILITY_HOME": str(other / "state"),
                      "DURABILITY_SPOOL_DIR": str(other / "spool"),
                      "DURABILITY_SOCKET": str(other / "s.sock")})


def _restore_json(run_id: str, there: Path, env: dict[str, str], *more: str) -> Any:
    done = cli("restore", run_id, "--from-remote", "backup", "--worktree", str(there),
               "--json", *more, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _settled() -> list[dict[str, str]] | None:
    """A's replication states once none is pending (each pushed, or failed:
    past the bound, a replication-failed gap)."""
    found = quick_states()
    return None if any(s.get("backup") == "pending" for s in found) else found


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["git", "jj"])
def test_machine_a_keeps_replicating_after_b_restores_and_b_gets_a_newest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    # A short bound: a refused push shows as `failed` (and a gap) in a second
    # or so, instead of the test waiting for a timeout.
    monkeypatch.setenv("DURABILITY_REPLICATION_BOUND_MS", "1500")
    repo = (make_git_repo(tmp_path / "a") if backend == "git"
            else make_jj_repo(tmp_path / "a"))
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    b_env = _machine_b(tmp_path)
    there = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(repo), str(there))
    add_remote(there, "backup", remote.as_uri(), env=b_env)
    a_svc = start_service(tmp_path)
    b_svc = start_service(tmp_path, env=b_env)
    try:
        capture(repo, "one")
        handed = capture(repo, "two")
        wait_for(lambda: all(s == {"backup": "pushed"} for s in quick_states()), timeout=30)

        first = _restore_json(KEY.run_id, there, b_env)
        assert first["restored"]["commit_id"] == handed
        # B's service pushes B's pre-restore checkpoint (B's files before).
        pre = first["pre_restore"]["commit_id"]
        wait_for(lambda: pre in manifest_commits(remote), timeout=30)

        # (1) A goes on in the same attempt; its pushes still land.
        capture(repo, "three")
        newest = capture(repo, "four")
        newest_files = tree_manifest(repo)
        assert wait_for(_settled, timeout=30) == [{"backup": "pushed"}] * 4
        gaps = json.loads(cli("gaps", KEY.run_id, "--json").stdout)
        assert [g for g in gaps if g["reason"] == "replication-failed"] == []

        # (2) A second --from-remote on B restores A's newest seq.
        second = _restore_json(KEY.run_id, there, b_env)
        assert second["restored"] == {"seq": 4, "commit_id": newest}
        assert tree_manifest(there) == newest_files
    finally:
        assert b_svc.stop() == 0
        assert a_svc.stop() == 0
    # B's record of the run is A's chain and nothing else.
    rows = json.loads(cli("snapshots", KEY.run_id, "--json", env=b_env).stdout)
    assert [(r["seq"], r["source"]) for r in rows] == [(n, "manual") for n in (1, 2, 3, 4)]


def _push_all() -> None:
    settings = Settings.from_env()
    with Store(settings.database) as store:
        assert Replicator(settings, lambda: store, os.environ).run_once() > 0


@pytest.mark.slow
@pytest.mark.parametrize("target", ["fresh-clone", "empty-folder"])
def test_b_undo_names_its_own_run_and_brings_back_b_files(tmp_path: Path,
                                                          target: str) -> None:
    """(3) The printed undo (human and --json) names the pre-restore's own
    run, not the restored one, and running it puts B's tree back."""
    repo = make_git_repo(tmp_path / "a")
    remote = bare_remote(tmp_path / "backup.git")
    add_remote(repo, "backup", remote.as_uri())
    (repo / "only-on-a.txt").write_text("a\n")
    handed = capture(repo, "one")
    _push_all()
    b_env = _machine_b(tmp_path)
    there = tmp_path / "b"
    if target == "fresh-clone":
        git(tmp_path, "clone", "-q", str(repo), str(there))
    else:
        there.mkdir()
    add_remote(there, "backup", remote.as_uri(), env=b_env)
    # A dry run makes the empty folder a repository and records A's run.
    out = _restore_json(KEY.run_id, there, b_env, "--dry-run")
    assert out["target"]["commit_id"] == handed
    (there / "mine-on-b.txt").write_text("b's own work\n")
    before = tree_manifest(there)
    human = cli("restore", KEY.run_id, "--from-remote", "backup", "--worktree", str(there),
                env=b_env)
    assert human.returncode == 0, human.stderr
    assert not (there / "mine-on-b.txt").exists()
    undo = human.stdout.strip().split("; undo: ", 1)[1].split()
    assert undo[:2] == ["durability", "restore"]
    own_run = undo[2]
    assert own_run != KEY.run_id
    assert undo[3:] == ["--node", KEY.node_id, "--iteration", "0", "--attempt", "1",
                        "--seq", "1"]
    # The restored run holds A's chain only; the pre-restore is in its own run.
    rows = json.loads(cli("snapshots", KEY.run_id, "--json", env=b_env).stdout)
    assert [r["commit_id"] for r in rows] == [handed]
    [pre] = json.loads(cli("snapshots", own_run, "--json", env=b_env).stdout)
    assert (pre["source"], pre["worktree"]) == ("pre-restore", str(there))

    # --latest in B's worktree names that run: its checkpoint is the newest.
    latest = json.loads(cli("snapshots", "--latest", "--json", env=b_env, cwd=there).stdout)
    assert [r["run_id"] for r in latest] == [own_run]

    done = cli(*undo[1:], env=b_env)
    assert done.returncode == 0, done.stderr
    assert tree_manifest(there) == before

    # --json names the same place (run, node, iteration, attempt, seq).
    again = _restore_json(KEY.run_id, there, b_env)
    where = again["pre_restore"]
    assert where["run_id"] not in (KEY.run_id, own_run)
    assert {k: where[k] for k in ("node_id", "iteration", "attempt", "seq")} == {
        "node_id": KEY.node_id, "iteration": 0, "attempt": 1, "seq": 1}
    done = cli("restore", where["run_id"], "--node", where["node_id"], "--seq",
               str(where["seq"]), "--json", env=b_env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["restored"]["commit_id"] == where["commit_id"]
    assert tree_manifest(there) == before
