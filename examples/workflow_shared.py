"""Parallel tasks on one shared worktree: ``durability run
examples/workflow_shared.py --worktree REPO`` (a jj or git repository).

``notes`` and ``changelog`` write different files of REPO at the same time
(``max_parallel=2``), in the run's own worktree: no copies, no merge.  Two
writers of one worktree at once are refused at load (``WORKFLOW_INVALID``)
unless the workflow says it accepts the risk, as this one does with
``shared_worktree_ok=True``: a resume restores the worktree for the task it
re-runs, to the newest checkpoint of the worktree across the run's attempts
(docs/how-to/runs.md, "Where a re-run starts"), so a task that finished keeps its
files, but what the other wrote after that checkpoint is undone.  ``lint``
only reads (``worktree="read"``), so it may run beside anything.

Kill the process while ``changelog`` sleeps and ``durability resume RUN``:
``notes`` is not run again and NOTES.md stays; ``changelog`` starts again from
the newest checkpoint (``durability logs RUN`` shows the ``restore`` and why).
For tasks that write the same files, use ``worktree="isolated"``
(examples/workflow_parallel.py).
"""

from __future__ import annotations

import time
from pathlib import Path

from durability.runs import TaskContext, Workflow

workflow = Workflow("shared", max_parallel=2, shared_worktree_ok=True)


def _tree(ctx: TaskContext) -> Path:
    return Path(ctx.worktree or ".")


@workflow.task()
def notes(ctx: TaskContext) -> dict[str, str]:
    (_tree(ctx) / "NOTES.md").write_text("# Notes\n")
    return {"wrote": "NOTES.md"}


@workflow.task()
def changelog(ctx: TaskContext) -> dict[str, str]:
    (_tree(ctx) / "CHANGELOG.md").write_text("# Changelog\n")
    time.sleep(0.5)  # long enough to overlap with `notes` (and to kill)
    return {"wrote": "CHANGELOG.md"}


@workflow.task(deps=["notes", "changelog"], worktree="read")
def lint(ctx: TaskContext) -> dict[str, list[str]]:
    found = sorted(p.name for p in _tree(ctx).glob("*.md"))
    return {"checked": found}
