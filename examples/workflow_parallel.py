"""Parallel tasks in isolated worktrees: ``durability run examples/workflow_parallel.py
--worktree REPO`` (a jj or git repository).

``survey`` writes a plan; ``docs`` and ``tests`` then run at the same time
(``max_parallel=2``), each in a worktree of its own (a jj workspace or a git
worktree under ``$DURABILITY_HOME/worktrees``) made from the shared tree as
it was when the task began.  When each finishes, its changes are merged back
into REPO (three-way); ``report`` (shared) sees both.  Kill the process while
they run and ``durability resume RUN``: an interrupted task goes on in the
same isolated worktree, put back to its last checkpoint.  Had both edited
the same lines of one file differently, the second merge would fail the run
with ``WORKTREE_CONFLICT`` (exit 16), keeping both trees as checkpoints.

To try an edit of ``report`` from where it began, ``durability checkpoints RUN
--node report`` lists its checkpoints, and ``durability fork RUN --node report
--seq S`` starts a new run from one: the three earlier outputs are copied and
only the edited task runs.
"""

from __future__ import annotations

import time
from pathlib import Path

from durability.runs import TaskContext, Workflow

# Two tasks that write may run at once: each needs its own worktree (a
# shared one is refused at load, unless shared_worktree_ok=True says so).
workflow = Workflow("parallel", max_parallel=2)


def _tree(ctx: TaskContext) -> Path:
    return Path(ctx.worktree or ".")


@workflow.task()
def survey(ctx: TaskContext) -> dict[str, list[str]]:
    (_tree(ctx) / "PLAN.md").write_text("- docs\n- tests\n")
    return {"parts": ["docs", "tests"]}


@workflow.task(deps=["survey"], worktree="isolated")
def docs(ctx: TaskContext) -> dict[str, str]:
    (_tree(ctx) / "docs").mkdir(exist_ok=True)
    (_tree(ctx) / "docs" / "guide.md").write_text("# Guide\n")
    time.sleep(0.5)  # long enough to overlap with `tests` (and to kill)
    return {"wrote": "docs/guide.md"}


@workflow.task(deps=["survey"], worktree="isolated")
def tests(ctx: TaskContext) -> dict[str, str]:
    (_tree(ctx) / "tests").mkdir(exist_ok=True)
    (_tree(ctx) / "tests" / "test_guide.py").write_text("def test_guide():\n    pass\n")
    time.sleep(0.5)
    return {"wrote": "tests/test_guide.py"}


@workflow.task(deps=["docs", "tests"])
def report(ctx: TaskContext) -> dict[str, list[str]]:
    found = sorted(str(p.relative_to(_tree(ctx))) for p in _tree(ctx).rglob("*")
                   if p.is_file() and not p.relative_to(_tree(ctx)).parts[0].startswith("."))
    (_tree(ctx) / "REPORT.md").write_text("".join(f"- {f}\n" for f in found))
    return {"files": found}
