"""Kill -9 acceptance of the two halves together (docs/how-to/runs.md, "Attempts
checkpoint themselves", "Where a re-run starts", "Parallel tasks and
worktrees"): isolated tasks running two at once checkpoint themselves in
their own worktrees, a task killed twice resumes in its own worktree (never
the shared one, where a parallel task's merged work stays), merges back,
and the event log tells the story.  Real jj and git, the installed CLI; the
tasks kill their own process at the exact point under test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.runs.isolated import task_worktrees
from durability.runs.run_rows import Runs
from tests.durability.runs import isokit
from tests.helpers import cli, run_cli, state_database

BACKENDS = ["jj", "git"]

# fast and slow run at once, each in its own worktree.  slow's attempt 1
# checkpoints slow.txt, waits until fast is merged and recorded, writes a
# stray file and dies; attempt 2 writes another stray file and dies before
# any checkpoint of its own but its start; attempt 3 writes watched.txt and
# waits until its own watch has checkpointed it.  check (shared) then sees
# the merged tree.
KILLED_TWICE = """
import signal

from durability.runs.run_rows import Runs

workflow = Workflow("twice", max_parallel=2, worktree="isolated")


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def wait(what, ready):
    deadline = time.monotonic() + 60
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} never happened")
        time.sleep(0.02)


@workflow.task()
def fast(ctx):
    Path(ctx.worktree, "fast.txt").write_text("fast\\n")
    return {"fast": True}


@workflow.task()
def slow(ctx):
    log(node="slow", attempt=ctx.attempt, worktree=ctx.worktree, files=files(ctx))
    runs = Runs(Settings.from_env(ctx.env).database)
    if ctx.attempt == 1:
        Path(ctx.worktree, "slow.txt").write_text("slow\\n")
        checkpoint(ctx, "slow wrote")
        wait("fast's output", lambda: any(o["node_id"] == "fast"
                                          for o in runs.outputs(ctx.run_id)))
        Path(ctx.worktree, "stray1.txt").write_text("never checkpointed\\n")
        die()
    if ctx.attempt == 2:
        Path(ctx.worktree, "stray2.txt").write_text("never checkpointed\\n")
        die()
    Path(ctx.worktree, "watched.txt").write_text("seen by the watch\\n")
    wait("a watch checkpoint", lambda: any(
        c.source == "watch" and c.attempt == ctx.attempt and c.worktree == ctx.worktree
        for c in runs.checkpoints(ctx.run_id, "slow")))
    return {"attempt": ctx.attempt}


@workflow.task(deps=["fast", "slow"], worktree="shared")
def check(ctx):
    log(node="check", worktree=ctx.worktree, files=files(ctx))
    return {}
"""


def _runs(tmp_path: Path) -> Runs:
    return Runs(state_database())


def _logs(run_id: str) -> list[dict[str, object]]:
    done = run_cli("logs", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_isolated_task_killed_twice_resumes_in_its_own_worktree_and_merges_back(
        tmp_path: Path, backend: str) -> None:
    folder = tmp_path / "wf"
    isokit.write(folder, KILLED_TWICE)
    repo = isokit.make_repo(tmp_path / "repo", backend)
    first = cli("run", str(folder / "wf.py"), "--run-id", "tw", "--worktree", str(repo))
    assert first.returncode == -9, first.stderr
    # fast merged back into the shared worktree before slow died.
    assert (repo / "fast.txt").exists() and not (repo / "slow.txt").exists()
    second = cli("resume", "tw")
    assert second.returncode == -9, second.stderr
    done = cli("resume", "tw")
    assert done.returncode == 0, done.stderr

    seen = isokit.side(folder)
    slow = [ln for ln in seen if ln["node"] == "slow"]
    own = slow[0]["worktree"]
    assert [s["attempt"] for s in slow] == [1, 2, 3]
    assert all(s["worktree"] == own for s in slow) and own != str(repo)
    # Each re-run started in its own worktree at slow's checkpointed work:
    # attempt 1's stray write undone, and attempt 2's too (the floor).
    assert [s["files"] for s in slow[1:]] == [["README.md", "slow.txt"]] * 2
    [check] = [ln for ln in seen if ln["node"] == "check"]
    assert check["worktree"] == str(repo)
    assert check["files"] == ["README.md", "fast.txt", "slow.txt", "watched.txt"]
    assert not list(repo.glob("stray*"))

    with _runs(tmp_path) as runs:
        cps = runs.checkpoints("tw", "slow")
        states = [(a.attempt, a.state) for a in runs.attempts("tw") if a.node_id == "slow"]
        rows = {r.node_id: r for r in task_worktrees(runs, "tw")}
    assert states == [(1, "abandoned"), (2, "abandoned"), (3, "succeeded")]
    assert rows["slow"].path == own and rows["slow"].state == "removed"
    # The attempts checkpointed themselves in the isolated worktree, with
    # their own identity: a start each, and attempt 3's watch (its end
    # capture found the tree the watch had recorded: no new row, contract 3).
    in_own = {(c.attempt, c.source, c.label) for c in cps if c.worktree == own}
    assert {(a, "attempt", "attempt start") for a in (1, 2, 3)} <= in_own
    assert any(a == 3 and source == "watch" for a, source, _ in in_own)
    # Restores went to the isolated worktree only: the shared one holds no
    # pre-restore checkpoint (nothing of fast's was rolled back).
    assert {c.worktree for c in cps if c.source == "pre-restore"} == {own}
    assert [(c.attempt, c.source) for c in cps if c.worktree == str(repo)] == [(3, "merged")]

    events = _logs("tw")
    story = [(e["kind"], e["node_id"], e["attempt"]) for e in events
             if e["kind"] in ("restore", "merge", "merge-conflict", "attempt-abandoned",
                              "attempt-finished")]
    assert story == [
        ("merge", "fast", 1), ("attempt-finished", "fast", 1),
        ("attempt-abandoned", "slow", 1), ("restore", "slow", None),
        ("attempt-abandoned", "slow", 2), ("restore", "slow", None),
        ("merge", "slow", 3), ("attempt-finished", "slow", 3),
        ("attempt-finished", "check", 1)]
    restores = [e["detail"] for e in events if e["kind"] == "restore"]
    assert [r["to"]["attempt"] for r in restores] == [1, 2]  # type: ignore[index]
    merge = next(e["detail"] for e in events if e["kind"] == "merge" and e["node_id"] == "slow")
    assert merge["worktree"] == own and merge["into"] == str(repo)  # type: ignore[index]


# fast and slow both change README.md; slow's attempt 1 dies once fast is
# merged, its attempt 2 conflicts on merging back.
CONFLICT = """
import signal

from durability.runs.run_rows import Runs

workflow = Workflow("clash", max_parallel=2, worktree="isolated")


@workflow.task()
def fast(ctx):
    Path(ctx.worktree, "README.md").write_text("from fast\\n")
    return {}


@workflow.task()
def slow(ctx):
    log(node="slow", attempt=ctx.attempt, worktree=ctx.worktree, files=files(ctx))
    Path(ctx.worktree, "README.md").write_text("from slow\\n")
    if ctx.attempt == 1:
        checkpoint(ctx, "slow wrote")
        runs = Runs(Settings.from_env(ctx.env).database)
        deadline = time.monotonic() + 60
        while not any(o["node_id"] == "fast" for o in runs.outputs(ctx.run_id)):
            assert time.monotonic() < deadline, "fast never finished"
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGKILL)
    return {"attempt": ctx.attempt}
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_resumed_isolated_task_that_conflicts_keeps_both_sides_until_resolved(
        tmp_path: Path, backend: str) -> None:
    folder = tmp_path / "wf"
    isokit.write(folder, CONFLICT)
    repo = isokit.make_repo(tmp_path / "repo", backend)
    killed = cli("run", str(folder / "wf.py"), "--run-id", "cf", "--worktree", str(repo))
    assert killed.returncode == -9, killed.stderr

    clash = cli("resume", "cf")
    assert clash.returncode == 16, clash.stderr
    assert clash.stderr.startswith("durability: WORKTREE_CONFLICT: ")
    own = isokit.side(folder)[0]["worktree"]
    # Nothing of the conflicting merge reached the shared tree; the task's
    # worktree is kept as it ended.
    assert (repo / "README.md").read_text() == "from fast\n"
    assert Path(own, "README.md").read_text() == "from slow\n"

    # A person decides slow's README wins, in the shared tree, and resumes:
    # the task runs again in its kept worktree and now merges cleanly.
    (repo / "README.md").write_text("from slow\n")
    done = cli("resume", "cf")
    assert done.returncode == 0, done.stderr
    assert [(s["attempt"], s["worktree"]) for s in isokit.side(folder)] == [
        (1, own), (2, own), (3, own)]
    assert (repo / "README.md").read_text() == "from slow\n"
    with _runs(tmp_path) as runs:
        states = [(a.attempt, a.state) for a in runs.attempts("cf") if a.node_id == "slow"]
    assert states == [(1, "abandoned"), (2, "failed"), (3, "succeeded")]
    story = [(e["kind"], e["node_id"], e["attempt"]) for e in _logs("cf")
             if e["kind"] in ("restore", "merge", "merge-conflict")]
    assert story == [("merge", "fast", 1), ("restore", "slow", None),
                     ("merge-conflict", "slow", 2), ("merge", "slow", 3)]


# With a service up, the service watches the isolated worktree for the
# attempt; slow's attempt 1 dies once it sees that watch.
SERVICE_WATCHED = """
import signal

from durability.ground import client

workflow = Workflow("served", worktree="isolated")


@workflow.task()
def slow(ctx):
    log(node="slow", attempt=ctx.attempt, worktree=ctx.worktree, files=files(ctx))
    Path(ctx.worktree, f"a{ctx.attempt}.txt").write_text("work\\n")
    if ctx.attempt == 1:
        sock = Settings.from_env(ctx.env).socket_path
        mine = ("served", "slow", 1, ctx.worktree)
        deadline = time.monotonic() + 60
        while mine not in [(w["run_id"], w["node_id"], w["attempt"], w["worktree"])
                           for w in client.call(sock, {"v": 1, "op": "watches"},
                                                timeout_s=30)["watches"]]:
            assert time.monotonic() < deadline, "the service never watched the attempt"
            time.sleep(0.05)
        checkpoint(ctx, "a1")
        os.kill(os.getpid(), signal.SIGKILL)
    return {}
"""


def test_the_service_watches_an_isolated_attempt_and_drops_a_dead_ones_watch(
        tmp_path: Path) -> None:
    from durability.config import Settings
    from durability.ground import client
    from tests.helpers import start_service

    settings = Settings.from_env()
    folder = tmp_path / "wf"
    isokit.write(folder, SERVICE_WATCHED)
    repo = isokit.make_repo(tmp_path / "repo", "git")
    service = start_service(tmp_path)
    try:
        killed = cli("run", str(folder / "wf.py"), "--run-id", "served",
                     "--worktree", str(repo))
        assert killed.returncode == -9, killed.stderr
        own = isokit.side(folder)[0]["worktree"]
        left = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
        assert [(w["attempt"], w["worktree"]) for w in left["watches"]] == [(1, own)]
        done = cli("resume", "served")
        assert done.returncode == 0, done.stderr
        after = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
    finally:
        service.stop()
    assert after["watches"] == []
    assert [s["files"] for s in isokit.side(folder)] == [["README.md"], ["README.md", "a1.txt"]]
    assert sorted(p.name for p in repo.glob("a*.txt")) == ["a1.txt", "a2.txt"]
    with _runs(tmp_path) as runs:
        events = runs.events("served")
    restore = next(e.id for e in events if e.kind == "restore")
    dead = [e for e in events if e.kind == "checkpoint" and e.attempt == 1]
    # The dead attempt's watch in the isolated worktree ended before the
    # restore there: nothing was recorded in its name after it.
    assert dead and all(e.id < restore for e in dead), (restore, dead)
