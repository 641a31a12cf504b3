"""Declaring workflows, output contracts, retries, loops and the metadata check."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.ground.store_errors import ResumeMetadataMismatch, WorkflowInvalid
from durability.runs.execute import EngineConfig, start_run
from durability.runs.loader import load_workflow
from durability.runs.metadata import compute, verify
from durability.runs.run_rows import Runs
from durability.runs.workflow import Workflow
from tests.durability.runs import wfkit

FAST = EngineConfig(heartbeat_s=0.02)


def test_graph_errors_are_refused() -> None:
    wf = Workflow("bad")
    wf.task("a", deps=["b"])(lambda ctx: 1)
    wf.task("b", deps=["a"])(lambda ctx: 1)
    with pytest.raises(WorkflowInvalid, match="cycle"):
        wf.validate()
    wf2 = Workflow("bad2")
    wf2.task("a", deps=["ghost"])(lambda ctx: 1)
    with pytest.raises(WorkflowInvalid, match="unknown task 'ghost'"):
        wf2.validate()
    with pytest.raises(WorkflowInvalid, match="two tasks"):
        wf2.task("a")(lambda ctx: 1)
    with pytest.raises(WorkflowInvalid, match="invalid task id"):
        wf2.task("../x")(lambda ctx: 1)
    with pytest.raises(WorkflowInvalid, match="no tasks"):
        Workflow("empty").validate()


def test_dependency_order_follows_deps_not_declaration() -> None:
    wf = Workflow("order")
    wf.task("c", deps=["b"])(lambda ctx: 1)
    wf.task("a")(lambda ctx: 1)
    wf.task("b", deps=["a"])(lambda ctx: 1)
    assert [t.id for t in wf.order()] == ["a", "b", "c"]


CONTRACT = """
class Answer(BaseModel):
    value: int

workflow = Workflow("contract")

@workflow.task(output=Answer, retries=1)
def answer(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
    return {"value": "not a number"} if ctx.attempt == 1 else {"value": 7}

@workflow.task(deps=["answer"], until=lambda n: n >= 3, max_iterations=5)
def count(ctx):
    wfkit.CALLS.append((ctx.node_id, ctx.iteration, ctx.attempt))
    return (ctx.previous or 0) + ctx.inputs["answer"].value // 7
"""


def test_output_contract_retries_and_loops(runs: Runs, tmp_path: Path) -> None:
    outcome = start_run(runs, wfkit.write(tmp_path, CONTRACT), config=FAST, run_id="w1")
    assert outcome.state == "finished"
    first = runs.attempts("w1")[0]
    assert (first.node_id, first.state) == ("answer", "failed")
    assert "OUTPUT_INVALID" in (first.error_json or "")
    assert [(o["node_id"], o["iteration"], o["output"]) for o in runs.outputs("w1")] == [
        ("answer", 0, {"value": 7}), ("count", 0, 1), ("count", 1, 2), ("count", 2, 3)]


def test_retries_run_out_and_loops_have_a_limit(runs: Runs, tmp_path: Path) -> None:
    body = CONTRACT.replace("retries=1", "retries=0")
    outcome = start_run(runs, wfkit.write(tmp_path, body), config=FAST, run_id="w2")
    assert outcome.error and outcome.error["code"] == "OUTPUT_INVALID"
    body = CONTRACT.replace("n >= 3", "n >= 99")
    outcome = start_run(runs, wfkit.write(tmp_path, body, "wf2.py"), config=FAST, run_id="w3")
    assert outcome.error and outcome.error["code"] == "LOOP_LIMIT"


def test_metadata_names_changed_files_and_never_waives_root_drift(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "flows").mkdir()
    (project / "flows" / "shared_steps.py").write_text("X = 1\n")
    path = wfkit.write(project / "flows", "import shared_steps\nworkflow = Workflow('m')\n"
                       "workflow.task('a')(lambda ctx: shared_steps.X)\n")
    loaded = load_workflow(path)
    meta = compute(loaded.path, loaded.imported)
    assert set(meta.files) == {"flows/wf.py", "flows/shared_steps.py"}
    assert verify(meta, path, accept_change=False) == meta
    (project / "flows" / "shared_steps.py").write_text("X = 2\n")
    with pytest.raises(ResumeMetadataMismatch, match=r"flows/shared_steps.py \(changed\)"):
        verify(meta, path, accept_change=False)
    assert verify(meta, path, accept_change=True).files["flows/shared_steps.py"] != \
        meta.files["flows/shared_steps.py"]
    (project / "flows" / ".git").mkdir()  # the repository root moves
    with pytest.raises(ResumeMetadataMismatch, match="repository root changed"):
        verify(meta, path, accept_change=True)
