"""``durability fork`` of the same task twice: the first fork's restore
leaves a ``pre-restore`` checkpoint (its undo) on the parent's attempt, and
the second fork's point skips it exactly as the engine's restore target does,
so both forks start from the same checkpoint, copy the same outputs and run
the same tasks.  Real git, the installed CLI."""

from __future__ import annotations

from pathlib import Path

from durability.runs.run_rows import Runs
from tests.durability.runs import isokit
from tests.durability.runs.test_fork import run_chain
from tests.helpers import run_cli, run_cli_json, state_database


def test_forking_a_task_twice_starts_both_forks_from_the_same_checkpoint(
        tmp_path: Path) -> None:
    folder, last = run_chain(tmp_path)

    forks = {}
    for new in ("one", "two"):
        done = run_cli("fork", "orig", "--node", "t3", "--run-id", new)
        assert done.returncode == 0, done.stderr
        forks[new] = run_cli_json("run-status", new)["forked_from"]
        forks[new].pop("commit_id")
    # The first fork's restore left its undo on orig's t3 attempt, the tree
    # it replaced (t4.txt included), newer than every output of orig.
    with Runs(state_database()) as runs:
        sources = [c.source for c in runs.checkpoints("orig", "t3") if c.seq > last]
    assert sources and set(sources) == {"pre-restore"}
    expected = {"parent_run_id": "orig", "node_id": "t3", "iteration": 0, "attempt": 1,
                "seq": last, "copied": 2}
    assert forks == {"one": expected, "two": expected}
    ran = {new: [ln["node"] for ln in isokit.side(folder) if ln["run"] == new]
           for new in ("one", "two")}
    assert ran == {"one": ["t3", "t4"], "two": ["t3", "t4"]}
    with Runs(state_database()) as runs:
        one, two = (runs.outputs(new) for new in ("one", "two"))
    assert [o["node_id"] for o in one] == [o["node_id"] for o in two] == ["t1", "t2", "t3", "t4"]

    # Named by its seq, an undo is refused in one line naming the points.
    undo = run_cli("fork", "orig", "--node", "t3", "--seq", str(last + 1), "--run-id", "three")
    assert undo.returncode == 2, undo
    assert undo.stderr.startswith("durability: invalid-value: ") and "pre-restore" in undo.stderr
    assert f"fork from seq 1 to {last}" in undo.stderr
    assert len(undo.stderr.strip().splitlines()) == 1
    assert run_cli("run-status", "three").returncode == 3
