"""Runs driven by a worker process of their own: what ``durability mcp``'s
``run``, ``resume`` and ``fork`` start (docs/decisions/0053).

The caller records or claims the run with the engine's own checks
(``execute.create_run``, ``execute.resume_claim``, ``fork.create_fork``),
so every refusal is the caller's to answer with its code, then hands the
claim to a detached child (``hand_over``): ``durability resume RUN
--claim-epoch E --claim-owner NAME --quiet``, the command a supervisor's
child runs (``durability supervise``), in a session of its own so it
outlives the caller, its output appended to ``STATE/runs/RUN.log``.  The
child takes the claim over (``Runs.take_over``: its own pid from then on),
checks the workflow's files against the record again (``--claim-started``:
the caller marked the run running already), and drives the run
to its end or its park.  Between the claim and the take-over the run is
owned by the caller's live process, so nobody else resumes it; if the
child never takes it over, the heartbeat goes stale and ``supervise`` (or
a ``resume``) takes the run as from any owner that died.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from durability.ground.errors import DurabilityError
from durability.ground.ids import safe_filename
from durability.ground.paths import ensure_private_dir
from durability.ground.store_errors import EngineError
from durability.runs.fence import Claim
from durability.runs.run_rows import Runs

__all__ = ["Worker", "WorkerNotStarted", "hand_over", "log_path", "worker_argv"]


@dataclass(frozen=True)
class Worker:
    """The detached process that drives a run."""

    run_id: str
    #: The claim it drives under.
    epoch: int
    owner: str
    pid: int
    #: Where its output goes (appended).
    log: str


class WorkerNotStarted(EngineError):
    """The worker process could not be started; the run was parked paused."""

    code = "RUN_WORKER_FAILED"


def log_path(runs_dir: Path, run_id: str) -> Path:
    """The log a run's workers append to (``supervise``'s children too)."""
    return runs_dir / f"{safe_filename(run_id)}.log"


def worker_argv(claim: Claim, *, accept_workflow_change: bool = False,
                python: str = sys.executable) -> list[str]:
    """The worker's command: an argument list, never a shell."""
    return [python, "-P", "-m", "durability", "resume", claim.run_id,
            "--claim-epoch", str(claim.epoch), "--claim-owner", claim.owner.name,
            "--claim-started", "--quiet",
            *(["--accept-workflow-change"] if accept_workflow_change else [])]


def spawn(claim: Claim, *, runs_dir: Path, env: Mapping[str, str] | None,
          accept_workflow_change: bool = False) -> tuple[subprocess.Popen[bytes], Path]:
    """Start the worker for ``claim``, detached; its log."""
    log = log_path(ensure_private_dir(runs_dir), claim.run_id)
    with open(log, "ab") as out:
        child = subprocess.Popen(
            worker_argv(claim, accept_workflow_change=accept_workflow_change),
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=None if env is None
            else dict(env), close_fds=True,
            start_new_session=True)  # detached: it outlives the process that claimed
    return child, log


def hand_over(runs: Runs, claim: Claim, *, runs_dir: Path, env: Mapping[str, str] | None,
              accept_workflow_change: bool = False) -> Worker:
    """Start the worker that drives ``claim``'s run.  A worker that cannot
    be started leaves the run paused (so a ``resume`` takes it at once,
    rather than after the stale-heartbeat wait) and raises
    ``WorkerNotStarted``.

    The run is marked running here, before the worker exists: from this
    answer on, ``run-status`` says running (a resumed paused run no longer
    says paused while its worker starts), and a pause or cancel asked from
    now on is kept for the worker (``Runs.start_running``)."""
    runs.start_running(claim)
    try:
        child, log = spawn(claim, runs_dir=runs_dir, env=env,
                           accept_workflow_change=accept_workflow_change)
    except (OSError, DurabilityError) as exc:  # no process, or no private log folder
        error = {"code": WorkerNotStarted.code, "message": f"cannot start a worker: {exc}",
                 "node_id": None}
        runs.park(claim, "paused", error=error)
        raise WorkerNotStarted(f"run {claim.run_id}: cannot start a worker ({exc}); it is "
                               f"paused: resume it with `durability resume {claim.run_id}`"
                               ) from exc
    # Reaped when it ends (a long-lived caller, the MCP server, keeps no
    # zombies); the thread never keeps the caller from exiting.
    threading.Thread(target=child.wait, name=f"worker-{child.pid}", daemon=True).start()
    return Worker(claim.run_id, claim.epoch, claim.owner.name, child.pid, str(log))
