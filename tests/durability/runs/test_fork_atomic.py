"""A fork is one transaction: the new run, the outputs it copies and its
link to the parent exist together or not at all.  A failure after the first
statement, or a real kill -9 of ``durability fork`` paused inside that
transaction, leaves no run (never one a ``resume`` would take for a fresh
run and re-run from its first task), and the same fork made again is whole.
In process on SQLite and PostgreSQL; the installed CLI with real git."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import durability.runs.fork
from durability.ground.store_errors import InvalidValue, NotFound
from durability.runs.execute import EngineConfig, start_run
from durability.runs.fork import find_point, fork_run, forked_from
from durability.runs.run_rows import Runs
from durability.store.models import AttemptKey, Checkpoint, NewCheckpoint
from tests.durability.runs import isokit, wfkit
from tests.durability.runs.test_fork import run_chain
from tests.helpers import cli, run_cli, run_cli_json, state_database, wait_for

THREE = """
workflow = Workflow("three")


@workflow.task("a")
def a(ctx):
    return {"node": "a"}


@workflow.task("b", deps=["a"])
def b(ctx):
    return {"node": "b"}


@workflow.task("c", deps=["b"])
def c(ctx):
    return {"node": "c"}
"""

FAST = EngineConfig(heartbeat_s=0.02)


def _never_restored(point: Checkpoint, worktree: str) -> str:
    raise AssertionError("a run without a worktree restores nothing")


def test_a_fork_failing_after_its_first_statement_records_nothing(
        runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = wfkit.write(tmp_path, THREE)
    assert start_run(runs, path, config=FAST, run_id="orig").state == "finished"
    # c's checkpoint, taken after every output of orig was recorded.
    runs.record_checkpoint(NewCheckpoint(
        key=AttemptKey("orig", "c", 0, 1), commit_id="c" * 40, worktree=str(tmp_path),
        source="attempt", request_id=str(uuid.uuid4()), label="attempt end"))

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("injected after the outputs and the fork row were written")

    # The fork's own event is its last statement: the run row, the copied
    # outputs and the run_forks row are written by then.
    monkeypatch.setattr(durability.runs.fork, "append", fail)
    with pytest.raises(RuntimeError, match="injected"):
        fork_run(runs, "orig", node_id="c", config=FAST, restore=_never_restored,
                 new_id="again")
    with pytest.raises(NotFound):
        runs.get_run("again")
    assert runs.outputs("again") == []
    assert forked_from(runs, "again") is None
    assert runs.events("again") == []

    monkeypatch.undo()
    assert fork_run(runs, "orig", node_id="c", config=FAST, restore=_never_restored,
                    new_id="again").state == "finished"
    fork = forked_from(runs, "again")
    assert fork is not None and (fork.node_id, fork.copied) == ("c", 2)
    assert [o["node_id"] for o in runs.outputs("again")] == ["a", "b", "c"]
    assert [e.kind for e in runs.events("again")][:2] == ["run-started", "fork"]


def test_find_point_skips_pre_restore_checkpoints(runs: Runs, tmp_path: Path) -> None:
    path = wfkit.write(tmp_path, THREE)
    assert start_run(runs, path, config=FAST, run_id="orig").state == "finished"
    key = AttemptKey("orig", "b", 0, 1)
    for commit, source in (("1", "attempt"), ("2", "wrap"), ("3", "pre-restore"),
                           ("4", "pre-restore")):
        runs.record_checkpoint(NewCheckpoint(key=key, commit_id=commit * 40,
                                             worktree=str(tmp_path), source=source,
                                             request_id=str(uuid.uuid4())))
    assert find_point(runs, "orig", "b").seq == 2
    assert find_point(runs, "orig", "b", seq=1).seq == 1
    with pytest.raises(InvalidValue, match=r"seq 3 is a pre-restore .* seq 1 to 2"):
        find_point(runs, "orig", "b", seq=3)
    with pytest.raises(NotFound, match=r"seq 1 to 4"):
        find_point(runs, "orig", "b", seq=5)
    # An attempt of nothing but pre-restores is no point at all.
    runs.record_checkpoint(NewCheckpoint(key=AttemptKey("orig", "b", 0, 2),
                                         commit_id="5" * 40, worktree=str(tmp_path),
                                         source="pre-restore", request_id=str(uuid.uuid4())))
    assert (find_point(runs, "orig", "b").attempt, find_point(runs, "orig", "b").seq) == (1, 2)


# Runs ``durability fork`` with the fork's event append (its transaction's
# last statement) replaced by a pause: a marker file, then wait for a signal.
PAUSED_FORK = """
import signal
import sys
from pathlib import Path

import durability.runs.fork

MARKER = Path(sys.argv[1])


def paused(*args, **kwargs):
    MARKER.touch()
    while True:
        signal.pause()


durability.runs.fork.append = paused
sys.argv = ["durability", *sys.argv[2:]]
from durability.__main__ import main

main()
"""


def test_kill_9_inside_the_fork_leaves_no_run_and_the_fork_again_is_whole(
        tmp_path: Path) -> None:
    folder, last = run_chain(tmp_path)

    marker = tmp_path / "paused"
    proc = subprocess.Popen([sys.executable, "-c", PAUSED_FORK, str(marker), "fork", "orig",
                             "--node", "t3", "--run-id", "again"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: marker.exists() or proc.poll() is not None, timeout=120)
    finally:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -9 and marker.exists(), err

    gone = run_cli("run-status", "again")
    assert gone.returncode == 3 and gone.stderr.startswith("durability: not-found: "), gone
    with Runs(state_database()) as runs:
        assert runs.outputs("again") == [] and runs.events("again") == []
        assert forked_from(runs, "again") is None
    assert cli("resume", "again").returncode == 3, "nothing to resume"

    done = run_cli("fork", "orig", "--node", "t3", "--run-id", "again")
    assert done.returncode == 0, done.stderr
    fork = run_cli_json("run-status", "again")["forked_from"]
    assert (fork["seq"], fork["copied"]) == (last, 2)
    assert [ln["node"] for ln in isokit.side(folder) if ln["run"] == "again"] == ["t3", "t4"]
    with Runs(state_database()) as runs:
        assert [o["node_id"] for o in runs.outputs("again")] == ["t1", "t2", "t3", "t4"]
