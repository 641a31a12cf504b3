"""Every ``--json`` command of the CLI and every MCP tool, over the
worktree ``wirekit.build`` records: their answers by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from durability.ground.errors import exit_code
from durability.store import NotFound
from tests.durability.output import wirekit
from tests.durability.output.wirekit import run

#: `status` when no service runs.
NOT_FOUND_EXIT = exit_code(NotFound(""))

WORKFLOW = """\
from __future__ import annotations

import uuid
from pathlib import Path

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.ground.errors import exit_code
from durability.store import NotFound
from durability.runs.workflow import Workflow

workflow = Workflow("quick")


@workflow.task()
def first(ctx):
    Path(ctx.worktree, "made.txt").write_text("made\\n")
    snapshot_now(Settings.from_env(ctx.env), key=ctx.key, path=Path(ctx.worktree),
                 request_id=str(uuid.uuid4()), source="wrap")
    return {"n": 1}


@workflow.task(deps=["first"], approval=True)
def gate(ctx):
    return {}
"""


def cli_answers(tmp_path: Path) -> dict[str, Any]:
    """The CLI's ``--json`` answers, by command."""
    _, repo = wirekit.build(tmp_path)
    bare = (tmp_path / "remote.git").as_uri()
    out: dict[str, Any] = {}
    with wirekit.cwd(repo):
        (repo / "c.txt").write_text("c\n")
        out["snapshot"] = run("snapshot", str(repo), "--run", "rc", "--node", "session",
                              "--label", "manual", "--json")
        out["snapshot deduped"] = run("snapshot", str(repo), "--run", "rc", "--node",
                                      "session", "--json")
        out["sessions"] = run("sessions", "--json")
        out["snapshots"] = run("snapshots", "ra", "--json")
        out["show first"] = run("show", "ra", "--seq", "1", "--json")
        out["show"] = run("show", "ra", "--seq", "2", "--json")
        out["diff"] = run("diff", "ra", "--seq", "2", "--json")
        out["diff first"] = run("diff", "ra", "--seq", "1", "--json")
        out["diff to"] = run("diff", "ra", "--seq", "1", "--to", "3", "--json")
        out["diff worktree"] = run("diff", "ra", "--seq", "3", "--worktree", "--json")
        out["log"] = run("log", "--json")
        out["gaps"] = run("gaps", "ra", "--json")
        out["attempts"] = run("attempts", "ra", "--json")
        out["logs"] = run("logs", "ra", "--json")
        out["remote add"] = run("remote", "add", "backup", bare, "--json")
        out["remote list"] = run("remote", "list", "--json")
        out["remote remove"] = run("remote", "remove", "backup", "--json")
        out["gc dry run"] = run("gc", "--dry-run", "--keep-all-days", "0", "--hourly-days",
                                "0", "--daily-days", "0", "--json")
        out["forget dry run"] = run("forget", "gone.txt", "--dry-run", "--json")
        out["restore dry run"] = run("restore", "ra", "--seq", "1", "--dry-run", "--json")
        out["restore path dry run"] = run("restore", "ra", "--seq", "1", "--path", "a.txt",
                                          "--dry-run", "--json")
        out["restore"] = run("restore", "ra", "--seq", "1", "--json")
        out["restore path"] = run("restore", "ra", "--seq", "3", "--path", "a.txt", "--json")
        out["status"] = run("status", "--json", code=NOT_FOUND_EXIT)
        out["stop"] = run("stop", "--json")
    project = tmp_path / "project"
    project.mkdir()
    out["install-hook"] = run("install-hook", "--scope", "project", "--project-dir",
                              str(project), "--mcp", "--json")
    # Its notes depend on the machine (a login shell's PATH): a list of
    # lines, pinned as a key and a type, not as a count.
    notes = out["install-hook"]["notes"]
    assert isinstance(notes, list) and all(isinstance(n, str) for n in notes)
    out["install-hook"]["notes"] = ["a note"]
    out["install-hook uninstall"] = run("install-hook", "--scope", "project", "--project-dir",
                                        str(project), "--mcp", "--uninstall", "--json")
    flow = tmp_path / "quick.py"
    flow.write_text(WORKFLOW)
    out["run"] = run("run", str(flow), "--run-id", "q0", "--worktree", str(repo), "--json")
    out["run existing"] = run("run", str(flow), "--run-id", "q0", "--worktree", str(repo),
                              "--json")
    out["runs"] = run("runs", "--json")
    out["run-status"] = run("run-status", "q0", "--json")
    out["fork"] = run("fork", "q0", "--node", "first", "--run-id", "q1", "--json")
    out["run-status forked"] = run("run-status", "q1", "--json")
    return out


def mcp_answers(tmp_path: Path) -> dict[str, Any]:
    """The MCP tools' answers, by tool, as the server puts them on the wire."""
    from durability.mcp import tools

    settings, repo = wirekit.build(tmp_path)
    here = tools.Here(settings, repo, allow_approve=True)
    served = tools.tools(here)
    out: dict[str, Any] = {}

    def call(name: str, label: str | None = None, **args: Any) -> None:
        tool = served[name]
        answer = tool.run(here, tool.input.model_validate(args))
        assert isinstance(answer, tool.output)
        out[label or name] = answer.model_dump(mode="json", by_alias=True)

    from durability.store.remote_rows import Remotes

    Remotes(settings.database).add(str(repo), "backup", (tmp_path / "remote.git").as_uri())
    call("sessions")
    call("snapshots", run_id="ra")
    call("show", "show first", run_id="ra", seq=1)
    call("show", run_id="ra", seq=2)
    call("diff", run_id="ra", seq=2)
    call("diff", "diff first", run_id="ra", seq=1)
    call("diff", "diff to", run_id="ra", seq=1, to_seq=3, patch=True)
    call("diff", "diff worktree", run_id="ra", seq=3, to_worktree=True)
    call("log")
    call("gaps", run_id="ra")
    call("attempts", run_id="ra")
    call("logs", run_id="ra")
    call("remotes")
    call("gc_preview", keep_all_days=0, hourly_days=0, daily_days=0)
    call("service_status")
    call("restore", "restore dry run", run_id="ra", seq=1, dry_run=True)
    call("restore", run_id="ra", seq=1)
    (repo / "d.txt").write_text("d\n")
    call("snapshot_now", run_id="ra", label="now")
    flow = tmp_path / "quick.py"
    flow.write_text(WORKFLOW)
    with wirekit.cwd(repo):
        run("run", str(flow), "--run-id", "q0", "--worktree", str(repo), "--json")
    call("runs")
    call("run_status", run_id="q0")
    call("approve", run_id="q0", node_id="gate")
    call("deny", run_id="q0", node_id="gate", reason="no")
    # The run tools: each run is driven by a detached worker, waited for
    # here (its shape is the answer's, not the worker's timing).
    mine = repo / "quick.py"  # a workflow inside the served worktree
    mine.write_text(WORKFLOW)
    call("run", workflow=str(mine), run_id="q2")
    _parked(settings, "q2")
    call("run", "run existing", workflow=str(mine), run_id="q2")
    call("pause", run_id="q2")
    call("resume", run_id="q2")
    _parked(settings, "q2")
    call("cancel", run_id="q2")
    call("fork", run_id="q2", node_id="first", new_run_id="q3")
    _parked(settings, "q3")
    return out


def _parked(settings: Any, run_id: str) -> None:
    import time

    from durability.runs.run_rows import PARKED, Runs

    deadline = time.monotonic() + 120
    with Runs(settings.database) as runs:
        while runs.get_run(run_id).state not in PARKED:
            assert time.monotonic() < deadline, f"run {run_id} never parked"
            time.sleep(0.1)


def mcp_schemas() -> dict[str, Any]:
    """Every tool's input and output schema, as ``tools/list`` serves them."""
    from durability.mcp import tools

    return {t.name: {"input": t.input.model_json_schema(),
                     "output": t.output.model_json_schema(mode="serialization",
                                                          by_alias=True)}
            for t in [*tools.TOOLS, tools.APPROVE]}
