"""Two machines sharing one PostgreSQL store, each with a repository at the
same path (the fleet of containers at /workspace of docs/how-to/remote.md): each
machine's worktree is its own (host id and path), so one machine's gc never
judges the other's checkpoints, seqs are numbered per machine, and a
checkpoint's base stays on its machine.

The machines are this process with two state folders (each container's
own volume: each keeps its own machine id, the host name is the same), or
with two ``DURABILITY_HOST_ID``s as well; their repositories take turns at
one path (the other one waits beside it), real git and jj repositories,
real captures, real gc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.retention.gc import run_gc
from durability.retention.policy import Policy
from durability.store import Store
from durability.store.host import host_id
from tests import pg
from tests.durability.retention.gckit import DAY, KEY, T0, Recorder, file_at, make_repo
from tests.helpers import run_cli_json

AGE_ONLY = Policy(keep_all_days=2.5, hourly_days=0, daily_days=0, pre_restore_days=0,
                  jj_op_log_days=1, prune_grace_s=0)


def _machine(name: str, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
             named: bool) -> Settings:
    """The settings (and environment) of machine ``name``: its own state
    folder, and with ``named`` its own ``DURABILITY_HOST_ID``."""
    if named:
        monkeypatch.setenv("DURABILITY_HOST_ID", name)
    monkeypatch.setenv("DURABILITY_HOME", str(tmp_path / f"{name}-state"))
    monkeypatch.setenv("DURABILITY_SPOOL_DIR", str(tmp_path / f"{name}-spool"))
    monkeypatch.setenv("DURABILITY_DATABASE_URL", url)
    return Settings.from_env()


def _swap(path: Path, away: Path, back: Path) -> None:
    """The repository at ``path`` steps aside to ``away``; ``back`` takes its place."""
    path.rename(away)
    back.rename(path)


@pytest.mark.slow
@pytest.mark.parametrize("named", [False, True], ids=["kept-id", "DURABILITY_HOST_ID"])
@pytest.mark.parametrize("kind", ["git", "jj"])
def test_one_machine_s_gc_leaves_the_other_s_checkpoints_at_the_same_path(
        kind: str, named: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        pg_server: pg.PgServer) -> None:
    assert "DURABILITY_HOST_ID" not in os.environ
    url = pg_server.fresh_url()
    workspace = tmp_path / "workspace"
    # Machine 2 works first: five checkpoints, a day apart.
    m2 = _machine("m2", url, tmp_path, monkeypatch, named)
    make_repo(kind, workspace)
    rec2 = Recorder(m2, workspace)
    for _ in range(5):
        rec2.capture()
        rec2.clock.advance(DAY)
    before2 = rec2.store.checkpoints(KEY.run_id)
    rec2.close()
    workspace.rename(tmp_path / "m2-workspace")
    # Machine 1, later, at the same path, under the same run and node.
    m1 = _machine("m1", url, tmp_path, monkeypatch, named)
    assert host_id() != rec2.store.host  # two machines, however they are told apart
    make_repo(kind, workspace)
    rec1 = Recorder(m1, workspace, start_ms=T0 + 10 * DAY)
    rec1._n = 100  # request ids of its own (the recorder numbers them from 1)
    for _ in range(5):
        rec1.capture()
        rec1.clock.advance(DAY)
    rows1 = rec1.store.checkpoints(KEY.run_id)
    assert [c.seq for c in rows1] == [1, 2, 3, 4, 5]  # numbered on this machine alone
    # Its first checkpoint has no base: machine 2's are of another repository.
    shown = run_cli_json("show", KEY.run_id, "--node", KEY.node_id, "--seq", "1")
    assert shown["base"] is None
    assert [e["seq"] for e in run_cli_json("log", str(workspace))] == [5, 4, 3, 2, 1]

    report = run_gc(m1, rec1.store, AGE_ONLY, now_ms=T0 + 40 * DAY).to_dict()
    assert report["checkpoints"]["before"] == 5  # its own worktree's only
    assert [c.seq for c in rec1.store.checkpoints(KEY.run_id)] == [5]
    rec1.close()

    # Machine 2 finds every one of its checkpoints, each restorable.
    _swap(workspace, tmp_path / "m1-workspace", tmp_path / "m2-workspace")
    m2 = _machine("m2", url, tmp_path, monkeypatch, named)
    with Store(m2.database) as store2:
        assert store2.checkpoints(KEY.run_id) == before2
        for c in before2:
            assert file_at(workspace, c.commit_id) == rec2.content[(KEY, c.seq)]
        assert run_cli_json("show", KEY.run_id, "--node", KEY.node_id, "--seq", "2"
                            )["base"]["commit_id"] == before2[0].commit_id
        # And its own gc judges its own five, leaving machine 1's one.
        report = run_gc(m2, store2, AGE_ONLY, now_ms=T0 + 40 * DAY).to_dict()
        assert report["checkpoints"]["before"] == 5
        assert [c.seq for c in store2.checkpoints(KEY.run_id)] == [5]
    m1 = _machine("m1", url, tmp_path, monkeypatch, named)
    with Store(m1.database) as store1:
        assert [c.seq for c in store1.checkpoints(KEY.run_id)] == [5]
