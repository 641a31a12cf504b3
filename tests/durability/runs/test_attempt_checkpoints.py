"""Attempts checkpoint themselves (docs/how-to/runs.md): a start checkpoint, a
watch with the attempt's identity, a final capture however the attempt
ended; and ``restore_target``'s choice, row by row."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from durability.config import Settings
from durability.runs.attempt_checkpoints import restore_target
from durability.runs.execute import EngineConfig, start_run
from durability.runs.run_rows import Runs
from durability.store.models import Checkpoint
from durability.worktree_ops.ops import DurabilityOps
from tests.helpers import cli, make_jj_repo, run_cli, run_cli_json, state_database

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "workflow_hello.py"


def test_every_attempt_of_workflow_hello_has_checkpoints(tmp_path: Path, repo: Path) -> None:
    done = cli("run", str(EXAMPLE), "--run-id", "hello", "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    status = run_cli_json("run-status", "hello")
    attempts = [a for t in status["tasks"] for a in t["attempts"]]
    assert len(attempts) == 4  # outline, draft x3; publish waits for approval
    with Runs(state_database()) as runs:
        checkpoints = runs.checkpoints("hello")
    for a in attempts:
        assert a["latest_checkpoint"] is not None, a
        # jj_pointer is where the attempt's tree ended up: its last checkpoint.
        assert a["jj_pointer"] == a["latest_checkpoint"]["commit_id"]
        own = [c for c in checkpoints if (c.node_id, c.iteration, c.attempt) ==
               (a["node_id"], a["iteration"], a["attempt"])]
        assert (own[0].source, own[0].label) == ("attempt", "attempt start")
    # Each section file is in the final checkpoint of the attempt that wrote it.
    text = run_cli("show", "hello", "--node", "draft", "--iteration", "1").stdout
    assert "body.md" in text, text


WORKFLOW = """\
from __future__ import annotations

from pathlib import Path

from durability.runs.budget import Limits
from durability.runs.workflow import Workflow

workflow = Workflow("ends", limits=Limits(turns=1))


@workflow.task(checkpoints=False)
def quiet(ctx):
    return {"touched": False}


@workflow.task(deps=["quiet"], retries=0)
def fails(ctx):
    Path(ctx.worktree, "failed.txt").write_text("written, then raised\\n")
    raise RuntimeError("boom")
"""

BUDGET = """\
from __future__ import annotations

from pathlib import Path

from durability.runs.budget import Limits
from durability.runs.workflow import Workflow

workflow = Workflow("budget", limits=Limits(turns=1))


@workflow.task()
def spends(ctx):
    Path(ctx.worktree, "spent.txt").write_text("before the abort\\n")
    ctx.progress(turns=5)
    return {}
"""


@pytest.mark.parametrize(("body", "node", "state", "written"), [
    (WORKFLOW, "fails", "failed", "failed.txt"),
    (BUDGET, "spends", "stopped", "spent.txt"),
], ids=["failed", "budget-abort"])
def test_an_attempt_that_ends_badly_still_leaves_its_final_checkpoint(
        tmp_path: Path, settings: Settings, body: str, node: str, state: str,
        written: str) -> None:
    repo = make_jj_repo(tmp_path / "repo")
    path = tmp_path / "wf" / "wf.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(body))
    config = EngineConfig(ops=DurabilityOps(settings), heartbeat_s=0.05)
    with Runs(settings.database) as runs:
        outcome = start_run(runs, path, config=config, run_id="ends", worktree=str(repo))
        assert outcome.state == "failed"
        attempt = next(a for a in runs.attempts("ends") if a.node_id == node)
        own = [c for c in runs.checkpoints("ends", node)]
        quiet = runs.checkpoints("ends", "quiet")
    assert attempt.state == state
    assert [(c.source, c.label) for c in own] == [("attempt", "attempt start"),
                                                  ("attempt", "attempt end")]
    assert attempt.jj_pointer == own[-1].commit_id
    listing = run_cli("diff", "ends", "--node", node, "--seq", "1", "--to", "2",
                      "--name-only").stdout
    assert written in listing, listing
    assert quiet == []  # checkpoints=False: the engine took none


def _cp(node: str, attempt: int, seq: int, at: int, *, source: str = "wrap",
        label: str | None = None, worktree: str = "/w", iteration: int = 0) -> Checkpoint:
    return Checkpoint("r", node, iteration, attempt, seq, f"c-{node}-{attempt}-{seq}", None,
                      None, worktree, source, None, label, f"q-{node}-{attempt}-{seq}", at)


def _start(node: str, attempt: int, at: int, **kw: object) -> Checkpoint:
    return _cp(node, attempt, 1, at, source="attempt", label="attempt start", **kw)  # type: ignore[arg-type]


def test_the_target_is_the_newest_checkpoint_of_the_worktree_across_tasks() -> None:
    rows = [_start("slow", 1, 10), _cp("slow", 1, 2, 20), _start("fast", 1, 11),
            _cp("fast", 1, 2, 30, source="attempt", label="attempt end"),
            _cp("slow", 1, 3, 40, source="pre-restore"),        # never a target
            _cp("other", 1, 1, 50, worktree="/elsewhere")]      # another worktree
    target = restore_target(rows, node_id="slow", iteration=0, worktree="/w",
                            on_resume="continue")
    assert target is not None and target.checkpoint.commit_id == "c-fast-1-2"


def test_clean_goes_back_to_the_first_attempts_start_unless_that_drops_another_task() -> None:
    alone = [_start("j", 1, 10), _cp("j", 1, 2, 20), _start("j", 2, 30), _cp("j", 2, 2, 40)]
    target = restore_target(alone, node_id="j", iteration=0, worktree="/w", on_resume="clean")
    assert target is not None and (target.checkpoint.commit_id, target.reason) == \
        ("c-j-1-1", "first-start")
    shared = [*alone, _cp("fast", 1, 2, 25)]
    target = restore_target(shared, node_id="j", iteration=0, worktree="/w",
                            on_resume="clean")
    assert target is not None and target.checkpoint.commit_id == "c-j-2-2"
    assert "fast" in target.reason
    assert restore_target([], node_id="j", iteration=0, worktree="/w",
                          on_resume="continue") is None


GATED = """\
from __future__ import annotations

import time
from pathlib import Path

from durability.runs.workflow import Workflow

GATE = Path(__file__).with_name("gate")
workflow = Workflow("served")


@workflow.task()
def works(ctx):
    Path(ctx.worktree, "before.txt").write_text("1\\n")
    Path(__file__).with_name("waiting").write_text("yes\\n")
    deadline = time.monotonic() + 60
    while not GATE.exists():
        assert time.monotonic() < deadline, "the test never opened the gate"
        time.sleep(0.02)
    Path(ctx.worktree, "after.txt").write_text("2\\n")
    return {}
"""


def test_with_a_service_up_the_service_watches_the_attempt(
        tmp_path: Path, repo: Path, settings: Settings) -> None:
    import subprocess

    from durability.ground import client
    from tests.helpers import durability_exe, start_service, wait_for

    service = start_service(tmp_path)
    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "wf.py").write_text(GATED)
    run = subprocess.Popen([durability_exe(), "run", str(folder / "wf.py"), "--run-id", "sv",
                            "--worktree", str(repo)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (folder / "waiting").exists() or run.poll() is not None, timeout=60)
        during = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
        (folder / "gate").write_text("open\n")
        _out, err = run.communicate(timeout=120)
        after = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate(timeout=30)
        service.stop()
    assert run.returncode == 0, err
    assert [(w["run_id"], w["node_id"], w["attempt"], w["worktree"]) for w in
            during["watches"]] == [("sv", "works", 1, str(repo))]
    assert after["watches"] == []  # the attempt's end ended the watch
    with Runs(settings.database) as runs:
        own = runs.checkpoints("sv", "works")
        attempt = runs.attempts("sv")[0]
    assert (own[0].source, own[0].label) == ("attempt", "attempt start")
    assert attempt.jj_pointer == own[-1].commit_id
    shown = run_cli("diff", "sv", "--node", "works", "--seq", "1", "--to", str(own[-1].seq),
                    "--name-only").stdout
    assert "after.txt" in shown and "before.txt" in shown, shown


KILLED = """\
from __future__ import annotations

import os
import signal
from pathlib import Path

from durability.runs.workflow import Workflow

workflow = Workflow("killed")


@workflow.task(on_resume="clean")
def dies_once(ctx):
    Path(ctx.worktree, f"a{ctx.attempt}.txt").write_text("x\\n")
    if ctx.attempt == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return {}
"""


def run_killed(tmp_path: Path, repo: Path) -> None:
    """KILLED run as ``kw`` in ``repo``: its first attempt dies by SIGKILL,
    and the run's process with it."""
    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "wf.py").write_text(KILLED)
    killed = cli("run", str(folder / "wf.py"), "--run-id", "kw", "--worktree", str(repo))
    assert killed.returncode == -9, killed.stderr


def test_a_watch_the_service_kept_for_a_killed_attempt_ends_before_the_restore(
        tmp_path: Path, repo: Path, settings: Settings) -> None:
    from durability.ground import client
    from tests.helpers import start_service

    service = start_service(tmp_path)
    try:
        run_killed(tmp_path, repo)
        # The service ends the dead attempt's watch by itself (its owner is
        # gone: tests/durability/service/test_watch_owner.py); whether it
        # has yet or not, the resume's restore comes after its end.
        done = cli("resume", "kw")
        assert done.returncode == 0, done.stderr
        after = client.call(settings.socket_path, {"v": 1, "op": "watches"}, timeout_s=30)
    finally:
        service.stop()
    assert after["watches"] == []
    with Runs(settings.database) as runs:
        events = runs.events("kw")
    restore = next(e.id for e in events if e.kind == "restore")
    dead = [e for e in events if e.kind == "checkpoint" and e.attempt == 1]
    # The service kept watching the dead attempt; that watch ended before the
    # restore (clean: a1.txt goes), so nothing was recorded in the dead
    # attempt's name after it, such as a capture of the restored tree.
    assert dead and all(e.id < restore for e in dead), (restore, dead)
    assert not (repo / "a1.txt").exists() and (repo / "a2.txt").exists()
