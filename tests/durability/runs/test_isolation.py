"""Isolated worktrees (docs/how-to/runs.md, "Parallel tasks and worktrees"):
parallel tasks in their own jj workspaces or git worktrees, merged back;
conflicts; a kill -9 mid-task; the load-time refusal of parallel writers of
one shared worktree.  Real jj, real git, the installed CLI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from durability.runs.isolated import task_worktrees
from durability.runs.run_rows import Runs
from durability.store.models import Checkpoint
from tests.durability.runs import isokit
from tests.helpers import cli, run_cli, run_cli_json, state_database

BACKENDS = ["jj", "git"]

PARALLEL = """
workflow = Workflow("iso", max_parallel=2, worktree="isolated")


def make(name, other, content):
    @workflow.task(name)
    def task(ctx):
        log(node=name, attempt=ctx.attempt, worktree=ctx.worktree, files=files(ctx))
        meet(name, other)
        Path(ctx.worktree, f"{name}.txt").write_text(f"{name}\\n")
        if content is not None:
            Path(ctx.worktree, "README.md").write_text(content)
        return {"node": name}


make("left", "right", LEFT)
make("right", "left", RIGHT)


@workflow.task(deps=["left", "right"], worktree="shared")
def check(ctx):
    log(node="check", worktree=ctx.worktree, files=files(ctx))
    return {"files": files(ctx)}
"""


def _runs(tmp_path: Path) -> Runs:
    return Runs(state_database())


def _setup(tmp_path: Path, backend: str, left: str | None = None,
           right: str | None = None) -> tuple[Path, Path]:
    folder = tmp_path / "wf"
    isokit.write(folder, f"LEFT = {left!r}\nRIGHT = {right!r}\n" + PARALLEL)
    return folder, isokit.make_repo(tmp_path / "repo", backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_parallel_isolated_tasks_both_land_in_the_shared_worktree(
        tmp_path: Path, backend: str) -> None:
    folder, repo = _setup(tmp_path, backend, left="hello\nfrom left\n")
    (repo / "notes.txt").write_text("uncommitted, in the shared tree\n")
    done = cli("run", str(folder / "wf.py"), "--run-id", "p1", "--worktree", str(repo))
    assert done.returncode == 0, done.stderr

    seen = {ln["node"]: ln for ln in isokit.side(folder)}
    # Each ran in a worktree of its own, which started as the shared tree was.
    assert seen["left"]["worktree"] != seen["right"]["worktree"] != str(repo)
    assert seen["left"]["files"] == seen["right"]["files"] == ["README.md", "notes.txt"]
    assert seen["check"]["worktree"] == str(repo)
    assert seen["check"]["files"] == ["README.md", "left.txt", "notes.txt", "right.txt"]
    assert (repo / "README.md").read_text() == "hello\nfrom left\n"
    with _runs(tmp_path) as runs:
        rows = task_worktrees(runs, "p1")
        cps = runs.checkpoints("p1", "left")
    assert [(r.node_id, r.kind, r.state) for r in rows] == [
        ("left", backend, "removed"), ("right", backend, "removed")]
    assert not any(Path(r.path).exists() for r in rows), "merged worktrees are cleaned up"
    # The attempt checkpointed itself in its own worktree (start, end); the
    # merge's capture of the task's tree is that end checkpoint (an unchanged
    # tree adds no row), then the shared tree after the merge.
    left_path = rows[0].path
    assert [(c.source, c.label, c.worktree) for c in cps[:2]] == [
        ("attempt", "attempt start", left_path), ("attempt", "attempt end", left_path)]
    assert [(c.source, c.worktree) for c in cps[2:]] == [("merged", str(repo))]
    # A removed worktree's checkpoints stay restorable, into another worktree.
    task_tree = _task_tree(cps, left_path)
    back = run_cli("restore", "p1", "--node", "left", "--attempt", "1", "--seq",
                   str(task_tree.seq), "--worktree", str(repo))
    assert back.returncode == 0, back.stderr
    assert sorted(p.name for p in repo.iterdir() if p.is_file() and p.name != ".git") == [
        "README.md", "left.txt", "notes.txt"]
    if backend == "jj":
        heads = subprocess.run([isokit_jj(), "-R", str(repo), "--ignore-working-copy",
                                "workspace", "list"], capture_output=True, text=True)
        assert heads.stdout.count(":") == 1, heads.stdout  # only the default workspace left


def _task_tree(cps: list[Checkpoint], path: str) -> Checkpoint:
    """The task's tree as it was merged: its newest checkpoint in its own
    worktree (the attempt's end capture, or the merge's own when the tree
    changed after it)."""
    return [c for c in cps if c.worktree == path][-1]


def isokit_jj() -> str:
    from tests.helpers import jj_path

    return jj_path()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_conflicting_merge_fails_with_worktree_conflict_and_keeps_both_sides(
        tmp_path: Path, backend: str) -> None:
    folder, repo = _setup(tmp_path, backend, left="from left\n", right="from right\n")
    done = cli("run", str(folder / "wf.py"), "--run-id", "c1", "--worktree", str(repo))
    assert done.returncode == 16, (done.returncode, done.stderr)
    assert done.stderr.startswith("durability: WORKTREE_CONFLICT: ")
    assert "README.md" in done.stderr

    status = run_cli_json("run-status", "c1")
    assert status["state"] == "failed" and status["error"]["code"] == "WORKTREE_CONFLICT"
    loser = status["error"]["node_id"]
    shown = {t["id"]: t["worktrees"] for t in status["tasks"]}
    assert [w["state"] for w in shown[loser]] == ["conflict"]
    assert shown["check"] == []
    assert f"isolated {backend} worktree conflict: {shown[loser][0]['path']}" in \
        run_cli("run-status", "c1").stdout
    winner = "right" if loser == "left" else "left"
    # The first merge landed; the conflicting one wrote nothing into the shared tree.
    assert (repo / "README.md").read_text() == f"from {winner}\n"
    assert not (repo / f"{loser}.txt").exists()
    with _runs(tmp_path) as runs:
        row = next(r for r in task_worktrees(runs, "c1") if r.node_id == loser)
        listed = runs.checkpoints("c1", loser)
    cps = {c.source: c for c in listed}
    cps["merge"] = _task_tree(listed, row.path)
    assert row.state == "conflict" and Path(row.path, "README.md").read_text() == \
        f"from {loser}\n", "the task's worktree is kept as it ended"
    assert cps["merge-conflict"].worktree == str(repo)

    # Both sides are checkpoints: restoring each puts its tree back.
    (repo / "README.md").write_text("edited after the conflict\n")
    Path(row.path, "README.md").write_text("edited too\n")
    for source, where, text in (("merge", Path(row.path), f"from {loser}\n"),
                                ("merge-conflict", repo, f"from {winner}\n")):
        back = run_cli("restore", "c1", "--node", loser, "--attempt", "1",
                       "--seq", str(cps[source].seq))
        assert back.returncode == 0, back.stderr
        assert (where / "README.md").read_text() == text


KILLED = """
workflow = Workflow("killed", max_parallel=2, worktree="isolated")


@workflow.task()
def slow(ctx):
    log(node="slow", attempt=ctx.attempt, worktree=ctx.worktree, files=files(ctx))
    Path(ctx.worktree, "slow.txt").write_text(f"attempt {ctx.attempt}\\n")
    checkpoint(ctx, "slow wrote")
    log(node="slow", attempt=ctx.attempt, event="checkpointed")
    if ctx.attempt == 1:
        from durability.runs.run_rows import Runs

        runs = Runs(Settings.from_env(ctx.env).database)
        deadline = time.monotonic() + 60
        while not any(o["node_id"] == "fast" for o in runs.outputs(ctx.run_id)):
            assert time.monotonic() < deadline, "fast never finished"
            time.sleep(0.02)
        # Killed right after a write no checkpoint holds: at once, so the
        # attempt's own watch (300 ms settle) cannot have recorded it.
        Path(ctx.worktree, "stray.partial").write_text("never checkpointed\\n")
        os.kill(os.getpid(), 9)
    return {"attempt": ctx.attempt}


@workflow.task()
def fast(ctx):
    Path(ctx.worktree, "fast.txt").write_text("fast\\n")
    return {"fast": True}
"""


@pytest.mark.parametrize(("backend", "lost"), [("jj", False), ("git", False), ("jj", True),
                                             ("git", True)],
                         ids=["jj", "git", "jj-deleted", "git-deleted"])
def test_kill_9_mid_task_then_resume_reuses_the_isolated_worktree(
        tmp_path: Path, backend: str, lost: bool) -> None:
    """Killed mid-task, the task goes on in its worktree; deleted meanwhile
    (``lost``), the worktree is made again from the same base, so nothing
    another task merged since is undone."""
    folder = tmp_path / "wf"
    isokit.write(folder, KILLED)
    repo = isokit.make_repo(tmp_path / "repo", backend)
    killed = cli("run", str(folder / "wf.py"), "--run-id", "k1", "--worktree", str(repo))
    assert killed.returncode == -9, killed.stderr
    assert (repo / "fast.txt").exists() and not (repo / "slow.txt").exists()
    if lost:
        shutil.rmtree(next(ln["worktree"] for ln in isokit.side(folder) if "worktree" in ln))

    done = cli("resume", "k1")
    assert done.returncode == 0, done.stderr
    starts = [ln for ln in isokit.side(folder) if "files" in ln]
    assert [s["attempt"] for s in starts] == [1, 2]
    assert starts[0]["worktree"] == starts[1]["worktree"] != str(repo)
    # Attempt 2 began in the same worktree, put back to attempt 1's last
    # checkpoint: its file is there, the stray write after it is undone.
    assert starts[1]["files"] == ["README.md", "slow.txt"]
    assert (repo / "slow.txt").read_text() == "attempt 2\n"
    assert (repo / "fast.txt").read_text() == "fast\n"
    assert not (repo / "stray.partial").exists()
    with _runs(tmp_path) as runs:
        rows = {r.node_id: r for r in task_worktrees(runs, "k1")}
        attempts = [(a.attempt, a.state, a.worktree) for a in runs.attempts("k1")
                    if a.node_id == "slow"]
    assert rows["slow"].state == "removed" and rows["slow"].path == starts[0]["worktree"]
    assert [a[:2] for a in attempts] == [(1, "abandoned"), (2, "succeeded")]


def test_parallel_writers_of_one_shared_worktree_are_refused_at_load(tmp_path: Path) -> None:
    body = """
    workflow = Workflow("clash", max_parallel=2{extra})

    @workflow.task()
    def one(ctx):
        return 1

    @workflow.task({two})
    def two(ctx):
        return 2
    """
    refused = isokit.write(tmp_path / "a", body.format(extra="", two=""))
    done = cli("run", str(refused), "--run-id", "w1")
    assert done.returncode == 13, done.stderr
    assert done.stderr.startswith("durability: WORKFLOW_INVALID: ")
    assert "'one' and 'two' both write the shared worktree" in done.stderr
    from durability.ground.store_errors import WorkflowInvalid
    from durability.runs.loader import load_workflow

    for extra, two in ((", shared_worktree_ok=True", ""), ("", "worktree='read'"),
                       (", worktree='isolated'", ""), ("", "deps=['one']")):
        ok = isokit.write(tmp_path / f"b{len(extra)}{len(two)}", body.format(extra=extra, two=two))
        assert load_workflow(ok).workflow.max_parallel == 2, (extra, two)
    # An isolated task writes the shared tree when it merges back: not beside
    # a shared writer.
    mixed = isokit.write(tmp_path / "c", body.format(extra="", two="worktree='isolated'"))
    with pytest.raises(WorkflowInvalid, match="'one' and 'two' both write"):
        load_workflow(mixed)


def test_worktree_modes_default_from_the_workflow_and_are_checked() -> None:
    from durability.ground.store_errors import WorkflowInvalid
    from durability.runs.workflow import Workflow

    wf = Workflow("modes", max_parallel=2, worktree="isolated")
    wf.task("a")(lambda ctx: 1)
    wf.task("b", worktree="read")(lambda ctx: 2)
    wf.task("c", deps=["a", "b"], worktree="shared")(lambda ctx: 3)
    wf.validate()
    assert [(t["id"], t["worktree"]) for t in wf.plan()] == [
        ("a", "isolated"), ("b", "read"), ("c", "shared")]
    with pytest.raises(WorkflowInvalid, match="worktree must be one of shared, isolated, read"):
        wf.task("d", worktree="private")(lambda ctx: 4)
    with pytest.raises(WorkflowInvalid, match="worktree must be one of"):
        Workflow("bad", worktree="nowhere")
    # A chain of shared writers never runs two at once: accepted.
    chain = Workflow("chain", max_parallel=4)
    chain.task("x")(lambda ctx: 1)
    chain.task("y", deps=["x"])(lambda ctx: 2)
    chain.task("z", deps=["y"])(lambda ctx: 3)
    chain.validate()
    chain.task("w", deps=["x"], worktree="isolated")(lambda ctx: 4)  # beside y and z
    with pytest.raises(WorkflowInvalid, match="'y' and 'w' both write"):
        chain.validate()  # w writes the shared tree when it merges back
    both = Workflow("both", max_parallel=2, worktree="isolated")
    both.task("p")(lambda ctx: 1)
    both.task("q")(lambda ctx: 2)
    both.task("r", worktree="read")(lambda ctx: 3)
    both.validate()  # isolated beside isolated, read beside anything


LOOP = """
workflow = Workflow("loop", worktree="isolated")


@workflow.task(until=lambda out: out["n"] >= 3)
def grow(ctx):
    path = Path(ctx.worktree, "grow.txt")
    log(node="grow", iteration=ctx.iteration, worktree=ctx.worktree)
    text = path.read_text() if path.exists() else ""
    path.write_text(text + f"iteration {ctx.iteration}\\n")
    return {"n": ctx.iteration + 1}
"""


def test_each_iteration_of_an_isolated_loop_gets_its_own_worktree(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    isokit.write(folder, LOOP)
    repo = isokit.make_repo(tmp_path / "repo", "jj")
    done = cli("run", str(folder / "wf.py"), "--run-id", "l1", "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    # Each iteration started from the shared tree with the ones before merged in.
    assert (repo / "grow.txt").read_text() == "iteration 0\niteration 1\niteration 2\n"
    used = [ln["worktree"] for ln in isokit.side(folder)]
    assert len(set(used)) == 3 and str(repo) not in used
    with _runs(tmp_path) as runs:
        rows = task_worktrees(runs, "l1")
    assert [(r.iteration, r.state) for r in rows] == [(0, "removed"), (1, "removed"),
                                                      (2, "removed")]
