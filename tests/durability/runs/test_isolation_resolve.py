"""Resolving an isolated task's merge conflict, as docs/how-to/runs.md tells
(``A conflict``): the resolution in the task's worktree alone conflicts
again (the merge base stays the task's start), the same resolution in both
trees lands on resume.  Real jj and git, the installed CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.runs.isolated import task_worktrees
from durability.runs.run_rows import Runs
from tests.durability.runs import isokit
from tests.helpers import cli, run_cli_json, state_database

# Both write README.md on their first attempt only: a later attempt (after
# the resume) works on whatever its worktree holds.
CONFLICTING = """
workflow = Workflow("resolve", max_parallel=2, worktree="isolated")


def make(name, other):
    @workflow.task(name)
    def task(ctx):
        if ctx.attempt == 1:
            meet(name, other)
            Path(ctx.worktree, "README.md").write_text(f"from {name}\\n")
        Path(ctx.worktree, f"{name}.txt").write_text(f"{name}\\n")
        return {"node": name}


make("left", "right")
make("right", "left")
"""

RESOLVED = "from left\nfrom right\n"


def _conflicted(tmp_path: Path, backend: str) -> tuple[Path, Path]:
    """The shared worktree and the kept worktree of the task that conflicted."""
    folder = tmp_path / "wf"
    isokit.write(folder, CONFLICTING)
    repo = isokit.make_repo(tmp_path / "repo", backend)
    done = cli("run", str(folder / "wf.py"), "--run-id", "r1", "--worktree", str(repo))
    assert done.returncode == 16, (done.returncode, done.stderr)
    loser = run_cli_json("run-status", "r1")["error"]["node_id"]
    with Runs(state_database()) as runs:
        row = next(r for r in task_worktrees(runs, "r1") if r.node_id == loser)
    return repo, Path(row.path)


@pytest.mark.parametrize("backend", ["jj", "git"])
def test_the_same_resolution_in_both_trees_lands_on_resume(tmp_path: Path,
                                                           backend: str) -> None:
    repo, kept = _conflicted(tmp_path, backend)
    (repo / "README.md").write_text(RESOLVED)
    (kept / "README.md").write_text(RESOLVED)
    done = cli("resume", "r1")
    assert done.returncode == 0, done.stderr
    assert (repo / "README.md").read_text() == RESOLVED
    assert (repo / "left.txt").exists() and (repo / "right.txt").exists()
    assert not kept.exists(), "merged back, the kept worktree is removed"


def test_a_resolution_in_the_task_tree_alone_conflicts_again(tmp_path: Path) -> None:
    """What the docs warn of: the merge's base is still the tree the task
    began from, so the shared side's change still differs from it."""
    repo, kept = _conflicted(tmp_path, "git")
    (kept / "README.md").write_text(RESOLVED)
    done = cli("resume", "r1")
    assert done.returncode == 16, done.stderr
    assert done.stderr.startswith("durability: WORKTREE_CONFLICT: ") and "README.md" in done.stderr
    assert (kept / "README.md").read_text() == RESOLVED, "the resolution is kept"
    assert (repo / "README.md").read_text() != RESOLVED
