"""``durability fork``: a new run from a middle checkpoint of an old one,
under an edited workflow file: the tasks completed before that checkpoint
are not run again, the worktree starts from its tree, the rest runs the new
code.  Real jj and git repositories, the installed CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.runs.run_rows import Runs
from tests.durability.runs import isokit
from tests.helpers import cli, run_cli, run_cli_json, state_database

CHAIN = """
VERSION = 1
workflow = Workflow("chain")


def make(node, deps):
    @workflow.task(node, deps=deps)
    def task(ctx):
        log(run=ctx.run_id, node=node, attempt=ctx.attempt, files=files(ctx))
        Path(ctx.worktree, f"{node}.txt").write_text(f"{node} v{VERSION}\\n")
        checkpoint(ctx, f"{node} wrote")
        return {"node": node, "version": VERSION}


make("t1", [])
make("t2", ["t1"])
make("t3", ["t2"])
make("t4", ["t3"])
"""


def run_chain(tmp_path: Path) -> tuple[Path, int]:
    """CHAIN run to its end as ``orig`` in a fresh git repository; returns
    the workflow's folder (its ``side.log``) and t3's newest seq."""
    folder = tmp_path / "wf"
    workflow = isokit.write(folder, CHAIN)
    repo = isokit.make_repo(tmp_path / "repo", "git")
    done = cli("run", str(workflow), "--run-id", "orig", "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    with Runs(state_database()) as runs:
        return folder, max(c.seq for c in runs.checkpoints("orig", "t3"))


# On both backends: the fork restores the parent's worktree to a checkpoint
# the engine's own attempt captures sit beside.
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jj", "git"])
def test_fork_from_a_middle_checkpoint_under_an_edited_workflow(
        tmp_path: Path, backend: str) -> None:
    folder = tmp_path / "wf"
    workflow = isokit.write(folder, CHAIN)
    repo = isokit.make_repo(tmp_path / "repo", backend)
    done = cli("run", str(workflow), "--run-id", "orig", "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    workflow.write_text(workflow.read_text().replace("VERSION = 1", "VERSION = 2"))

    with Runs(state_database()) as runs:
        # t3's own checkpoint (its attempt's start capture is seq 1, its end
        # capture adds nothing: the tree did not change after it).
        [wrote] = [c for c in runs.checkpoints("orig", "t3") if c.label == "t3 wrote"]
    assert wrote.seq == 2
    done = run_cli("fork", "orig", "--node", "t3", "--seq", "2", "--run-id", "again")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "run again finished"

    ran = [(ln["node"], ln["files"]) for ln in isokit.side(folder) if ln["run"] == "again"]
    # t1 and t2 completed before t3's checkpoint: copied, not run; t3 starts
    # from that checkpoint's tree (t4.txt, written later, is not there).
    assert ran == [("t3", ["README.md", "t1.txt", "t2.txt", "t3.txt"]),
                   ("t4", ["README.md", "t1.txt", "t2.txt", "t3.txt"])]
    assert {p.name: p.read_text() for p in repo.glob("t*.txt")} == {
        "t1.txt": "t1 v1\n", "t2.txt": "t2 v1\n", "t3.txt": "t3 v2\n", "t4.txt": "t4 v2\n"}
    with Runs(state_database()) as runs:
        outputs = {o["node_id"]: o["output"]["version"] for o in runs.outputs("again")}
        attempts = sorted({a.node_id for a in runs.attempts("again")})
    assert outputs == {"t1": 1, "t2": 1, "t3": 2, "t4": 2}
    assert attempts == ["t3", "t4"]

    status = run_cli_json("run-status", "again")
    assert status["forked_from"] == {"parent_run_id": "orig", "node_id": "t3", "iteration": 0,
                                     "attempt": 1, "seq": 2, "copied": 2,
                                     "commit_id": status["forked_from"]["commit_id"]}
    assert [t["state"] for t in status["tasks"]] == ["succeeded"] * 4
    text = run_cli("run-status", "again")
    assert "forked from orig at t3 it 0 att 1 seq 2 (2 outputs copied)" in text.stdout
    assert run_cli_json("run-status", "orig")["forked_from"] is None
    # The new run's log says where it came from, right after it started.
    with Runs(state_database()) as runs:
        kinds = [e.kind for e in runs.events("again")]
        [fork] = [e for e in runs.events("again") if e.kind == "fork"]
    assert kinds[:2] == ["run-started", "fork"]
    assert (fork.node_id, fork.iteration, fork.attempt, fork.seq) == ("t3", 0, 1, 2)
    assert fork.detail is not None and fork.detail["parent_run_id"] == "orig"
    assert fork.detail["copied"] == 2 and "restored" in fork.detail["done"]


ONE = """
workflow = Workflow("one")


@workflow.task()
def t3(ctx):
    checkpoint(ctx, "t3")
    return {}
"""


def test_fork_validates_ids_and_names_what_is_missing(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    workflow = isokit.write(folder, ONE)
    repo = isokit.make_repo(tmp_path / "repo", "git")
    assert cli("run", str(workflow), "--run-id", "orig", "--worktree", str(repo)).returncode == 0
    bad = run_cli("fork", "orig", "--node", "t3", "--run-id", "../escape")
    assert bad.returncode == 2 and bad.stderr.startswith("durability: invalid-value: ")
    missing = run_cli("fork", "orig", "--node", "nope")
    assert missing.returncode == 3 and "has no checkpoints" in missing.stderr
    no_seq = run_cli("fork", "orig", "--node", "t3", "--seq", "9")
    assert no_seq.returncode == 3 and "seq 1 to 1" in no_seq.stderr
    taken = run_cli("fork", "orig", "--node", "t3", "--run-id", "orig")
    assert taken.returncode == 2 and "already exists" in taken.stderr


def test_fork_of_a_run_whose_owner_is_alive_is_refused(tmp_path: Path) -> None:
    import subprocess

    from tests.helpers import durability_exe, wait_for

    folder = tmp_path / "wf"
    workflow = isokit.write(folder, CHAIN.replace(
        'checkpoint(ctx, f"{node} wrote")',
        'checkpoint(ctx, f"{node} wrote")\n'
        '        while node == "t2" and not (HERE / "go").exists():\n'
        '            time.sleep(0.02)'))
    repo = isokit.make_repo(tmp_path / "repo", "jj")
    proc = subprocess.Popen([durability_exe(), "run", str(workflow), "--run-id", "live",
                             "--worktree", str(repo)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (repo / "t2.txt").exists(), timeout=60)
        refused = run_cli("fork", "live", "--node", "t1", "--run-id", "copy")
        assert refused.returncode == 10, refused.stderr
        assert refused.stderr.startswith("durability: RUN_OWNER_ALIVE: ")
        assert (repo / "t2.txt").exists(), "nothing was restored under the live run"
    finally:
        (folder / "go").touch()
        assert proc.wait(60) == 0
    assert run_cli("run-status", "copy").returncode == 3
