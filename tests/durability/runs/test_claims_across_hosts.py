"""Claims across hosts (issue 15): processes on different machines, simulated
by different ``DURABILITY_HOST_ID``s, share one PostgreSQL store.  A live
owner elsewhere is never taken over (its pid means nothing here), a dead
host's run is taken over once its heartbeat is stale, and of two
supervisors racing for it exactly one wins."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from durability.runs.run_rows import Runs
from tests import pg
from tests.durability.runs import wfkit
from tests.helpers import durability_exe, make_jj_repo, wait_for

HOLD = """\
import time
from pathlib import Path

from pydantic import BaseModel

from durability.runs.workflow import Workflow

HERE = Path(__file__).parent
workflow = Workflow("hold")


class Out(BaseModel):
    n: int


@workflow.task("hold", output=Out)
def hold(ctx):
    with (HERE / "starts.log").open("a") as f:
        f.write("hold\\n")
    while not (HERE / "go").exists():
        time.sleep(0.05)
    return Out(n=1)
"""


@pytest.fixture
def shared(pg_server: pg.PgServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """One PostgreSQL store every process of the test uses."""
    url = pg_server.fresh_url()
    monkeypatch.setenv("DURABILITY_DATABASE_URL", url)
    return url


def _on(host: str, *argv: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DURABILITY_HOST_ID": host}
    return subprocess.Popen([durability_exe(), *argv], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _start_on_a(tmp_path: Path, run_id: str) -> tuple[Path, subprocess.Popen[str]]:
    folder = tmp_path / "wf"
    wfkit.write(folder, HOLD)
    (folder / "wf.py").write_text(HOLD)
    repo = make_jj_repo(tmp_path / "repo")
    (repo / "README.md").write_text("hello\n")
    owner = _on("host-a", "run", str(folder / "wf.py"), "--run-id", run_id,
                "--worktree", str(repo))
    wait_for(lambda: (folder / "starts.log").exists() or owner.poll() is not None, timeout=60)
    assert owner.poll() is None, owner.communicate()
    return folder, owner


def test_a_live_owner_on_another_host_is_never_taken_over(shared: str, tmp_path: Path) -> None:
    folder, owner = _start_on_a(tmp_path, "x1")
    try:
        # Host b cannot see host a's processes: a fresh heartbeat is all it
        # has, so it refuses, whatever pid the row names.
        resume = _on("host-b", "resume", "x1")
        out, err = resume.communicate(timeout=60)
        assert resume.returncode == 11, (out, err)
        assert err.startswith("durability: RUN_STILL_RUNNING: run x1 is owned by"), err
        sup = _on("host-b", "supervise", "--once", "--stale-after", "30s")
        out, err = sup.communicate(timeout=60)
        assert (sup.returncode, out) == (0, ""), err
        with Runs(shared) as runs:
            row = runs.get_run("x1")
        assert (row.owner_host, row.owner_pid, row.claim_epoch) == ("host-a", owner.pid, 1)
    finally:
        (folder / "go").touch()
        owner.communicate(timeout=60)
    assert owner.returncode == 0
    assert (folder / "starts.log").read_text() == "hold\n"


@pytest.mark.slow
def test_a_dead_hosts_run_is_taken_over_by_one_supervisor(shared: str, tmp_path: Path) -> None:
    folder, owner = _start_on_a(tmp_path, "x2")
    owner.kill()  # host a is gone: nothing beats for its run any more
    owner.communicate(timeout=30)
    with Runs(shared) as runs:
        beat = runs.get_run("x2").heartbeat_at_ms or 0
    early = _on("host-b", "supervise", "--once", "--stale-after", "20s")
    assert early.communicate(timeout=60)[0] == "", "taken over before the stale threshold"

    wait_for(lambda: time.time() * 1000 - beat > 2_500, timeout=10, interval=0.1)
    (folder / "go").touch()
    sups = [_on(host, "supervise", "--once", "--stale-after", "2s", "--id", host)
            for host in ("host-b", "host-c")]
    said = sorted(p.communicate(timeout=60)[0].strip() for p in sups)
    assert [p.returncode for p in sups] == [0, 0]
    assert said == ["", "resumed x2"]

    def finished() -> bool:
        with Runs(shared) as runs:
            return runs.get_run("x2").state == "finished"

    wait_for(finished, timeout=60, interval=0.1)
    with Runs(shared) as runs:
        row = runs.get_run("x2")
        attempts = [(a.attempt, a.state) for a in runs.attempts("x2")]
    assert row.owner is None and row.claim_epoch == 2
    assert attempts == [(1, "abandoned"), (2, "succeeded")]
    assert (folder / "starts.log").read_text() == "hold\nhold\n"  # one re-run, never two
