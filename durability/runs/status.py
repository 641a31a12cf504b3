"""What ``run-status`` shows: the run (and where it was forked from), its
tasks with their attempts (each with its ``jj_pointer`` and latest
checkpoint), their isolated worktrees and their outputs."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from durability.runs.fork import forked_from
from durability.runs.isolated import task_worktrees
from durability.runs.run_rows import Runs

__all__ = ["run_status"]


def run_status(runs: Runs, run_id: str) -> dict[str, Any]:
    """A JSON-ready description of ``run_id``."""
    row = runs.get_run(run_id)
    latest: dict[tuple[str, int, int], dict[str, Any]] = {}
    for cp in runs.checkpoints(run_id):  # ordered by attempt then seq: the last one wins
        latest[(cp.node_id, cp.iteration, cp.attempt)] = {
            "seq": cp.seq, "commit_id": cp.commit_id, "source": cp.source, "label": cp.label}
    outputs = runs.outputs(run_id)
    attempts = runs.attempts(run_id)
    isolated = task_worktrees(runs, run_id)
    tasks = []
    for spec in json.loads(row.plan_json or "[]"):
        mine = [a for a in attempts if a.node_id == spec["id"]]
        tasks.append({
            **spec,
            "state": _task_state(spec["id"], mine, outputs),
            "outputs": [{"iteration": o["iteration"], "attempt": o["attempt"],
                         "output": o["output"]} for o in outputs if o["node_id"] == spec["id"]],
            "worktrees": [{"iteration": w.iteration, "path": w.path, "kind": w.kind,
                           "state": w.state} for w in isolated if w.node_id == spec["id"]],
            "attempts": [{**_attempt(a.to_dict()),
                          "latest_checkpoint": latest.get((a.node_id, a.iteration, a.attempt))}
                         for a in mine],
        })
    fork = forked_from(runs, run_id)
    return {**row.to_dict(), "usage": asdict(runs.usage(run_id)), "tasks": tasks,
            "forked_from": fork.to_dict() if fork else None}


def _attempt(data: dict[str, Any]) -> dict[str, Any]:
    data.pop("run_id", None)
    data["error"] = json.loads(data.pop("error_json") or "null")
    return data


def _task_state(node_id: str, attempts: list[Any], outputs: list[dict[str, Any]]) -> str:
    if attempts and attempts[-1].state == "running":
        return "running"
    if any(o["node_id"] == node_id for o in outputs) and (
            not attempts or attempts[-1].state == "succeeded"):
        return "succeeded"
    return attempts[-1].state if attempts else "pending"
