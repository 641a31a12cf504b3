"""``durability fork`` at a task the workflow file no longer has: refused
in one line before anything is restored or recorded (the fork's promise is
that the task runs again from its checkpoint).  Real git, the installed CLI."""

from __future__ import annotations

from pathlib import Path

from tests.durability.runs import isokit
from tests.helpers import cli, run_cli

ONE = """
workflow = Workflow("one")


@workflow.task()
def t3(ctx):
    Path(ctx.worktree, "t3.txt").write_text("t3\\n")
    checkpoint(ctx, "t3")
    return {}
"""


def test_fork_at_a_task_the_edited_workflow_lacks_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    workflow = isokit.write(folder, ONE)
    repo = isokit.make_repo(tmp_path / "repo", "git")
    assert cli("run", str(workflow), "--run-id", "orig", "--worktree", str(repo)).returncode == 0
    workflow.write_text(workflow.read_text().replace("def t3(", "def t5("))
    (repo / "t3.txt").write_text("changed since, and checkpointed by the restore\n")

    done = run_cli("fork", "orig", "--node", "t3", "--run-id", "again")
    assert done.returncode == 3, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("durability: not-found: ") and "t5" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert (repo / "t3.txt").read_text().startswith("changed since"), "nothing restored"
    assert run_cli("run-status", "again").returncode == 3, "no run recorded"
