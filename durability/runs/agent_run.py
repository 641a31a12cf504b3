"""A one-task agent run (``durability agent run``; the MCP ``agent_run``
tool's twin): a workflow file holding the run's spec is written beside the
state, then the run starts like any other, so ``durability resume RUN``,
``run-status``, ``logs`` and ``supervise`` treat it as one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from durability.ground.store_errors import NotFound
from durability.runs.agent import spec_json, write_workflow_file
from durability.runs.budget import Limits
from durability.runs.execute import EngineConfig, new_run_id, start_run
from durability.runs.run_rows import Runs
from durability.runs.runner import RunOutcome
from durability.runs.workflow import validate_id

__all__ = ["run_agent"]


def run_agent(runs: Runs, prompt: str, *, worktree: str, folder: Path, config: EngineConfig,
              harness: Sequence[str] = ("claude",), run_id: str | None = None,
              model: str | None = None, max_turns: int | None = None,
              max_tokens: int | None = None, max_cost: float | None = None,
              output_schema: dict[str, Any] | None = None, corrections: int = 2,
              retries: int = 0) -> RunOutcome:
    """Start the one-task agent run ``run_id`` (new by default) in
    ``worktree`` and drive it; its workflow file goes into ``folder``
    (``durability.runs.agent.agents_folder()``).  A run id already used is
    reported as it stands (``RunOutcome.existing``), its file untouched."""
    run_id = validate_id(run_id or new_run_id(), "run id")
    path = folder / f"{run_id}.py"
    try:
        runs.get_run(run_id)
    except NotFound:
        spec = spec_json(prompt=prompt, harness=harness, model=model, max_turns=max_turns,
                         output_schema=output_schema, corrections=corrections, retries=retries)
        path = write_workflow_file(folder, run_id, spec)
    return start_run(runs, path, config=config, run_id=run_id, worktree=worktree,
                     limits=Limits(max_turns, max_tokens, max_cost))
