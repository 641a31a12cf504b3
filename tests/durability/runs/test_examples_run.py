"""The engine's examples run as their docstrings say (examples/): parallel
writers on one shared worktree (workflow_shared.py), isolated worktrees
merged back then a fork from the last task's checkpoint
(workflow_parallel.py).  on_resume and checkpoints=False are shown by
workflow_hello.py (tests/durability/runs/test_attempt_checkpoints.py runs it).
Plain git repositories (the faster backend), the installed CLI."""

from __future__ import annotations

from pathlib import Path

from durability.runs.run_rows import Runs
from tests.durability.runs import isokit
from tests.helpers import cli, run_cli, run_cli_json, state_database

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_workflow_shared_runs_two_writers_of_one_worktree(tmp_path: Path) -> None:
    repo = isokit.make_repo(tmp_path / "repo", "git")
    done = cli("run", str(EXAMPLES / "workflow_shared.py"), "--run-id", "sh",
               "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    outputs = {t["id"]: t["outputs"][0]["output"]
               for t in run_cli_json("run-status", "sh")["tasks"]}
    assert outputs["lint"] == {"checked": ["CHANGELOG.md", "NOTES.md", "README.md"]}


def test_workflow_parallel_merges_back_then_forks_from_the_report(tmp_path: Path) -> None:
    repo = isokit.make_repo(tmp_path / "repo", "git")
    done = cli("run", str(EXAMPLES / "workflow_parallel.py"), "--run-id", "par",
               "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    report = (repo / "REPORT.md").read_text()
    assert "- docs/guide.md\n" in report and "- tests/test_guide.py\n" in report

    forked = run_cli("fork", "par", "--node", "report", "--run-id", "par-2")
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.strip() == "run par-2 finished"
    with Runs(state_database()) as runs:
        ran = sorted({a.node_id for a in runs.attempts("par-2")})
        kinds = [e.kind for e in runs.events("par")]
    assert ran == ["report"]  # survey, docs and tests were copied, not re-run
    assert kinds.count("merge") == 2
    assert run_cli_json("run-status", "par-2")["forked_from"]["copied"] == 3
