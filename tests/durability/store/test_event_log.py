"""The event log (``durability logs``) and quiet contention, through the
installed CLI."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from durability.store.host import host_id
from tests.helpers import cli, durability_exe, run_cli, state_write, wait_for

GATED = """\
from __future__ import annotations

import time
from pathlib import Path

from durability.runs.workflow import Workflow

GATE = Path(__file__).with_name("gate")
workflow = Workflow("gated")


@workflow.task()
def first(ctx):
    Path(ctx.worktree, "first.txt").write_text("1\\n")
    return {"n": 1}


@workflow.task(deps=["first"])
def waits(ctx):
    deadline = time.monotonic() + 60
    while not GATE.exists():
        assert time.monotonic() < deadline, "the test never opened the gate"
        time.sleep(0.02)
    Path(ctx.worktree, "second.txt").write_text("2\\n")
    return {"n": 2}
"""

QUICK = """\
from __future__ import annotations

from durability.runs.workflow import Workflow

workflow = Workflow("quick")


@workflow.task(approval=True)
def gate(ctx):
    return {}
"""


def _workflow(tmp_path: Path, text: str, name: str = "wf.py") -> Path:
    path = tmp_path / "wf" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_logs_follow_sees_events_as_they_happen_and_ends_when_the_run_parks(
        tmp_path: Path, repo: Path) -> None:
    path = _workflow(tmp_path, GATED)
    run = subprocess.Popen([durability_exe(), "run", str(path), "--run-id", "g1",
                            "--worktree", str(repo)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    # A run that does not exist yet is not-found: follow once it does.
    wait_for(lambda: run_cli("logs", "g1").returncode == 0, timeout=60)
    follow = subprocess.Popen([durability_exe(), "logs", "g1", "--follow", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen: list[dict[str, object]] = []
        assert follow.stdout is not None
        for line in follow.stdout:
            seen.append(json.loads(line))
            if seen[-1]["kind"] == "attempt-started" and seen[-1]["node_id"] == "waits":
                break
        # Only now does the task go on: what follows is logged after logs started.
        path.with_name("gate").write_text("open\n")
        rest = [json.loads(line) for line in follow.stdout]
        assert follow.wait(60) == 0, follow.stderr.read() if follow.stderr else ""
        assert run.wait(60) == 0
    finally:
        for proc in (run, follow):
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=30)
    kinds = [(e["kind"], e["node_id"]) for e in rest]
    assert ("attempt-finished", "waits") in kinds and kinds[-1] == ("run-parked", None)
    assert [e["kind"] for e in seen][:2] == ["run-started", "attempt-started"]
    ids = [int(str(e["id"])) for e in seen + rest]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # The documented shape of one line.
    assert set(seen[0]) == {"id", "ts_ms", "run_id", "kind", "node_id", "iteration",
                            "attempt", "seq", "detail"}
    text = run_cli("logs", "g1")
    assert text.returncode == 0 and "checkpoint" in text.stdout and "run-parked" in text.stdout


def test_logs_of_an_unknown_run_is_not_found() -> None:
    done = run_cli("logs", "nope")
    assert done.returncode == 3 and done.stderr.startswith("durability: not-found: ")


def test_resume_never_reads_the_log(tmp_path: Path, repo: Path) -> None:
    path = _workflow(tmp_path, QUICK)
    assert cli("run", str(path), "--run-id", "q0", "--worktree", str(repo)).returncode == 0
    assert run_cli("approve", "q0", "gate").returncode == 0
    with state_write() as db:
        db.execute("DELETE FROM events")
    done = cli("resume", "q0")
    assert done.returncode == 0 and done.stdout.strip() == "run q0 finished", done.stderr


def _own(tmp_path: Path, run_id: str, **row: object) -> None:
    """Make the run's row say a live claim holds it (as another process, or
    another host, would appear to a resume)."""
    sets = ", ".join(f"{k}=${n}" for n, k in enumerate(row, 2))
    with state_write() as db:
        db.execute(f"UPDATE runs SET state='running', owner='other', claim_epoch=claim_epoch+1, "
                   f"heartbeat_at_ms=$1, {sets} WHERE run_id=${len(row) + 2}",
                   (time.time_ns() // 1_000_000, *row.values(), run_id))


# This machine's id (``durability.store.host.host_id``), resolved in the test (it is
# kept in the test's own state folder).
THIS_MACHINE = object()


@pytest.mark.parametrize(("owner", "status"), [
    ({"owner_pid": os.getpid(), "owner_host": THIS_MACHINE}, 10),
    ({"owner_pid": 1, "owner_host": "another-host.invalid"}, 11),
], ids=["owner-alive", "still-running"])
def test_resume_quiet_exits_with_the_contention_status_and_prints_nothing(
        tmp_path: Path, repo: Path, owner: dict[str, object], status: int) -> None:
    path = _workflow(tmp_path, QUICK)
    assert cli("run", str(path), "--run-id", "q1", "--worktree", str(repo)).returncode == 0
    _own(tmp_path, "q1", **{k: host_id() if v is THIS_MACHINE else v
                            for k, v in owner.items()})
    done = cli("resume", "q1", "--quiet")
    assert (done.returncode, done.stdout, done.stderr) == (status, "", "")
    loud = cli("resume", "q1")  # without --quiet it still says why
    assert loud.returncode == status and loud.stderr.startswith("durability: RUN_")


def test_a_second_run_with_the_same_run_id_reports_the_existing_run(
        tmp_path: Path, repo: Path) -> None:
    path = _workflow(tmp_path, QUICK)
    first = cli("run", str(path), "--run-id", "q2", "--worktree", str(repo))
    assert first.returncode == 0, first.stderr
    again = cli("run", str(path), "--run-id", "q2", "--worktree", str(repo))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("run q2 waiting-approval on gate") and \
        "already started: nothing done" in again.stdout
    as_json = json.loads(cli("run", str(path), "--run-id", "q2", "--json").stdout)
    assert as_json["existing"] is True and as_json["state"] == "waiting-approval"
    starts = [ln for ln in run_cli("logs", "q2").stdout.splitlines() if "run-started" in ln]
    assert len(starts) == 1  # nothing was started again
    other = _workflow(tmp_path, QUICK, "other.py")
    refused = cli("run", str(other), "--run-id", "q2")
    assert refused.returncode == 2 and "already exists" in refused.stderr
