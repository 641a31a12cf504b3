"""An example workflow: ``durability run examples/workflow_hello.py --worktree REPO``.

Three tasks in a jj worktree: ``outline`` writes a plan, ``draft`` loops
until it has written three sections, and ``publish`` waits for a person's
approval (``durability approve RUN publish``, then ``durability resume RUN``).
Every attempt checkpoints itself: the engine records its starting tree,
watches the worktree while it runs and takes a final capture when it ends
(``durability run-status RUN`` shows each attempt's checkpoint,
``durability logs RUN --follow`` the events as they happen).  Kill the
process at any point and ``durability resume RUN``: finished tasks are not
run again; ``draft`` continues from its last checkpoint (the default,
``on_resume="continue"``), ``outline`` starts clean from the tree its first
attempt started from, and ``publish``, which never touches the tree, takes
no checkpoints of its own (``checkpoints=False``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pydantic import BaseModel

from durability.runs import TaskContext, Workflow

workflow = Workflow("hello", max_parallel=1)


class Outline(BaseModel):
    sections: list[str]


class Draft(BaseModel):
    written: int


# Deterministic: on a re-run it writes the same file again, from a clean tree.
@workflow.task(output=Outline, on_resume="clean")
def outline(ctx: TaskContext) -> Outline:
    sections = ["intro", "body", "end"]
    Path(ctx.worktree or ".", "OUTLINE.md").write_text("\n".join(sections) + "\n")
    ctx.progress(turns=1)
    return Outline(sections=sections)


@workflow.task(deps=["outline"], output=Draft, until=lambda d: d.written >= 3)
def draft(ctx: TaskContext) -> Draft:
    sections = ctx.inputs["outline"].sections
    section = sections[ctx.iteration]
    Path(ctx.worktree or ".", f"{section}.md").write_text(f"# {section}\n")
    # Any process the task starts inherits the attempt's DURABILITY_* variables,
    # so an agent's hooks record checkpoints on this very attempt.
    subprocess.run(["true"], env=ctx.env, check=True)
    ctx.progress(turns=1)
    return Draft(written=ctx.iteration + 1)


@workflow.task(deps=["draft"], approval=True, checkpoints=False)
def publish(ctx: TaskContext) -> dict[str, str]:
    return {"published": ctx.idempotency_key}
