"""The run commands end to end, through the installed ``durability`` CLI."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import cli, make_jj_repo, run_cli, run_cli_json

WORKFLOW = """\
from __future__ import annotations

import uuid
from pathlib import Path

from pydantic import BaseModel

from durability.config import Settings
from durability.capture.snapshot import snapshot_now
from durability.runs.workflow import Workflow
import helper

SIDE = Path(__file__).with_name("side.log")
workflow = Workflow("cli")


class Count(BaseModel):
    n: int


def mark(name: str) -> None:
    with SIDE.open("a") as f:
        f.write(name + "\\n")


@workflow.task(output=Count)
def prepare(ctx):
    from durability.integrations.wrap import current_attempt

    ambient = current_attempt()
    mark("prepare" if ambient is not None and ambient.key == ctx.key else "no-ambient")
    Path(ctx.worktree, "prepared.txt").write_text(helper.TEXT)
    snapshot_now(Settings.from_env(ctx.env), key=ctx.key, path=Path(ctx.worktree),
                 request_id=str(uuid.uuid4()), source="wrap")
    ctx.progress(tokens=60)
    return {"n": 1}


@workflow.task(deps=["prepare"], approval=True, output=Count)
def ship(ctx):
    mark("ship")
    ctx.progress(tokens=60)
    return Count(n=ctx.inputs["prepare"].n + 1)
"""


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "wf.py").write_text(WORKFLOW)
    (folder / "helper.py").write_text('TEXT = "ready\\n"\n')
    repo = make_jj_repo(tmp_path / "repo")
    return folder, repo


def _marks(folder: Path) -> list[str]:
    return (folder / "side.log").read_text().split()


def _run(folder: Path, repo: Path, run_id: str, *extra: str) -> None:
    done = cli("run", str(folder / "wf.py"), "--run-id", run_id, "--worktree", str(repo), *extra)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"run {run_id} waiting-approval on ship")


def test_approval_survives_the_process_and_resume_continues_there(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path)
    _run(folder, repo, "a1")
    assert run_cli_json("run-status", "a1")["state"] == "waiting-approval"
    assert run_cli("approve", "a1", "ship").returncode == 0
    done = cli("resume", "a1")
    assert (done.returncode, done.stdout.strip()) == (0, "run a1 finished"), done.stderr
    assert _marks(folder) == ["prepare", "ship"]

    status = run_cli_json("run-status", "a1")
    [prepare, ship] = status["tasks"]
    assert [o["output"] for o in ship["outputs"]] == [{"n": 2}]
    [attempt] = prepare["attempts"]
    assert attempt["jj_pointer"] and attempt["latest_checkpoint"]["commit_id"] == \
        attempt["jj_pointer"]
    assert status["usage"]["tokens"] == 120
    assert [r["run_id"] for r in run_cli_json("runs")] == ["a1"]


def test_deny_fails_the_run_at_that_node(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path)
    _run(folder, repo, "d1")
    assert run_cli("deny", "d1", "ship", "--reason", "not today").returncode == 0
    done = cli("resume", "d1")
    assert done.returncode == 1
    assert done.stderr.startswith("durability: APPROVAL_DENIED: ship was denied: not today")
    assert _marks(folder) == ["prepare"]


def test_a_workflow_edit_trips_the_metadata_check_and_reverting_untrips_it(
        tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path)
    _run(folder, repo, "m1")
    run_cli("approve", "m1", "ship")
    original = (folder / "helper.py").read_text()
    (folder / "helper.py").write_text('TEXT = "changed\\n"\n')
    done = cli("resume", "m1")
    assert done.returncode == 12
    assert done.stderr.startswith("durability: RESUME_METADATA_MISMATCH:")
    assert "helper.py (changed)" in done.stderr and len(done.stderr.splitlines()) == 1
    assert run_cli_json("run-status", "m1")["state"] == "waiting-approval"  # nothing changed
    (folder / "helper.py").write_text(original)
    done = cli("resume", "m1")
    assert done.returncode == 0, done.stderr
    assert _marks(folder) == ["prepare", "ship"]


def test_accept_workflow_change_waives_the_hash_only(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path)
    _run(folder, repo, "m2")
    run_cli("approve", "m2", "ship")
    (folder / "wf.py").write_text(WORKFLOW + "\n# edited\n")
    assert cli("resume", "m2").returncode == 12
    done = cli("resume", "m2", "--accept-workflow-change")
    assert done.returncode == 0, done.stderr
    # Path drift is never waived.
    folder.rename(tmp_path / "moved")
    done = cli("resume", "m2", "--accept-workflow-change")
    assert done.returncode == 12 and "is missing" in done.stderr


def test_a_budget_from_the_command_line_names_its_limit(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path)
    done = cli("run", str(folder / "wf.py"), "--run-id", "b1", "--worktree", str(repo),
               "--max-tokens", "50")
    assert done.returncode == 15
    assert done.stderr.startswith("durability: BUDGET_TOKENS_EXCEEDED:")
    assert run_cli_json("run-status", "b1")["error"]["code"] == "BUDGET_TOKENS_EXCEEDED"


def test_pause_cancel_and_status_of_runs_that_are_not_there(tmp_path: Path) -> None:
    for command in (["pause", "nope"], ["cancel", "nope"], ["run-status", "nope"],
                    ["resume", "nope"], ["approve", "nope", "x"]):
        done = run_cli(*command)
        assert done.returncode == 3, (command, done.stderr)
        assert done.stderr.startswith("durability: not-found:")
    folder, repo = _setup(tmp_path)
    _run(folder, repo, "c1")
    assert run_cli("cancel", "c1").stdout.strip() == "run c1 cancelled"
    done = run_cli("pause", "c1")
    assert done.returncode == 14 and "RUN_NOT_ACTIVE" in done.stderr
    run_cli("approve", "c1", "ship")
    assert cli("resume", "c1").returncode == 0  # cancelled runs resume
    assert json.loads(run_cli("runs", "--json").stdout)[0]["state"] == "finished"


def test_an_accepted_change_is_the_new_baseline_with_its_new_imports(tmp_path: Path) -> None:
    """After --accept-workflow-change, a module the edit started importing is
    checked too, and run-status shows the workflow's tasks as they are now."""
    folder, repo = _setup(tmp_path)
    _run(folder, repo, "m3")
    (folder / "extra.py").write_text("VALUE = 1\n")
    (folder / "wf.py").write_text(WORKFLOW + "\nimport extra\n\n\n@workflow.task()\n"
                                  "def added(ctx):\n    return {'v': extra.VALUE}\n")
    done = cli("resume", "m3", "--accept-workflow-change")
    assert done.returncode == 0, done.stderr
    assert [t["id"] for t in run_cli_json("run-status", "m3")["tasks"]] == \
        ["prepare", "ship", "added"]
    (folder / "extra.py").write_text("VALUE = 2\n")
    done = cli("resume", "m3")
    assert done.returncode == 12, done.stdout
    assert "extra.py (changed)" in done.stderr


FLAKY = """\
from __future__ import annotations

import uuid
from pathlib import Path

from durability.config import Settings
from durability.capture.snapshot import snapshot_now
from durability.runs.workflow import Workflow

HERE = Path(__file__).parent
workflow = Workflow("flaky")


def mark(*parts: object) -> None:
    with (HERE / "side.log").open("a") as f:
        f.write(" ".join(str(p) for p in parts) + "\\n")


@workflow.task()
def upstream(ctx):
    mark("upstream", ctx.attempt)
    return {"n": 1}


@workflow.task(deps=["upstream"], retries=1)
def flaky(ctx):
    out = Path(ctx.worktree, "flaky.txt")
    mark("flaky", ctx.attempt, out.read_text().strip() if out.exists() else "-")
    out.write_text(f"attempt {ctx.attempt}\\n")
    snapshot_now(Settings.from_env(ctx.env), key=ctx.key, path=Path(ctx.worktree),
                 request_id=str(uuid.uuid4()), source="wrap")
    if (HERE / "fixed").read_text().strip() != "yes":
        raise RuntimeError(f"not fixed on attempt {ctx.attempt}")
    return {"n": ctx.inputs["upstream"]["n"] + 1}
"""


def test_a_failed_run_resumed_after_the_fix_reruns_the_failed_task(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "wf.py").write_text(FLAKY)
    (folder / "fixed").write_text("no\n")
    repo = make_jj_repo(tmp_path / "repo")
    done = cli("run", str(folder / "wf.py"), "--run-id", "f1", "--worktree", str(repo))
    assert done.returncode == 1
    assert done.stderr.startswith("durability: TASK_FAILED: RuntimeError: not fixed on attempt 2")
    assert run_cli_json("run-status", "f1")["state"] == "failed"

    (folder / "fixed").write_text("yes\n")
    done = cli("resume", "f1")
    assert (done.returncode, done.stdout.strip()) == (0, "run f1 finished"), done.stderr
    # The upstream task ran once; the failed one ran again as attempt 3, on
    # the tree its failed attempt left (a failure is not restored).
    assert (folder / "side.log").read_text().splitlines() == [
        "upstream 1", "flaky 1 -", "flaky 2 attempt 1", "flaky 3 attempt 2"]
    status = run_cli_json("run-status", "f1")
    [upstream, flaky] = status["tasks"]
    assert [(a["attempt"], a["state"]) for a in upstream["attempts"]] == [(1, "succeeded")]
    assert [(a["attempt"], a["state"]) for a in flaky["attempts"]] == \
        [(1, "failed"), (2, "failed"), (3, "succeeded")]
    assert [o["output"] for o in flaky["outputs"]] == [{"n": 2}]
    # Each attempt's own start checkpoint and its task's, on its own row
    # (its end capture found the same tree), and no pre-restore: a failed
    # attempt's tree is not restored before the retry.
    checkpoints = run_cli_json("snapshots", "f1", "--node", "flaky")
    assert [(c["attempt"], c["source"]) for c in checkpoints if c["source"] != "watch"] == \
        [(1, "attempt"), (1, "wrap"), (2, "attempt"), (2, "wrap"), (3, "attempt"), (3, "wrap")]


FAILING_WORKFLOW = """\
from durability.runs.workflow import Workflow

workflow = Workflow("fails")


@workflow.task()
def broken(ctx):
    raise ValueError("first line\\nsecond line\\n\\nthird line")
"""


def test_a_multi_line_task_error_is_one_line_on_stderr(tmp_path: Path) -> None:
    wf = tmp_path / "wf.py"
    wf.write_text(FAILING_WORKFLOW)
    done = cli("run", str(wf), "--run-id", "ml-1", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("durability: TASK_FAILED: ValueError: first line")
    assert "second line" in done.stderr and "third line" in done.stderr


# -- every documented run exit status, through the CLI --------------------------


def _own(run_id: str, **row: object) -> None:
    """Make the run's row say a live claim holds it (the row is ours to write:
    this is how another process, or another host, appears to a resume)."""
    import time

    from durability.config import Settings
    from durability.store.database import open_database

    sets = ", ".join(f"{k}=${n}" for n, k in enumerate(row, 2))
    db = open_database(Settings.from_env().database)  # autocommit, on either database
    db.execute(f"UPDATE runs SET state='running', owner='other', claim_epoch=claim_epoch+1, "
               f"heartbeat_at_ms=$1, {sets} WHERE run_id=${len(row) + 2}",
               (time.time_ns() // 1_000_000, *row.values(), run_id))
    db.close()


def test_a_resume_of_a_run_whose_owner_is_alive_exits_10(tmp_path: Path) -> None:
    import os

    from durability.store.host import host_id

    folder, repo = _setup(tmp_path)
    _run(folder, repo, "own1")
    _own("own1", owner_pid=os.getpid(), owner_host=host_id())
    done = cli("resume", "own1")
    assert done.returncode == 10
    assert done.stderr.startswith("durability: RUN_OWNER_ALIVE: ") and "--force" in done.stderr


def test_a_resume_of_a_run_with_a_fresh_heartbeat_elsewhere_exits_11(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path)
    _run(folder, repo, "own2")
    _own("own2", owner_pid=1, owner_host="another-host.invalid")
    done = cli("resume", "own2")
    assert done.returncode == 11
    assert done.stderr.startswith("durability: RUN_STILL_RUNNING: ")


def test_an_invalid_workflow_exits_13(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("this is not python(\n")
    done = cli("run", str(bad), "--worktree", str(make_jj_repo(tmp_path / "repo")))
    assert done.returncode == 13
    assert done.stderr.startswith("durability: WORKFLOW_INVALID: ")


def test_a_lost_claim_race_exits_75_and_says_nothing(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path)
    _run(folder, repo, "race1")
    # A supervisor's resume carries the epoch it claimed; another claim since
    # then (here: epoch 1 is long gone) means it lost the race.
    done = cli("resume", "race1", "--claim-epoch", "999", "--claim-owner", "sup")
    assert (done.returncode, done.stdout, done.stderr) == (75, "", "")
