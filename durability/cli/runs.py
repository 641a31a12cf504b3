"""``durability run``, ``resume``, ``approve``, ``deny``, ``pause``, ``cancel``,
``supervise``, ``runs`` and ``run-status``: thin commands over ``durability.runs``.

A run or resume that parks (waiting for approval, a quota, paused,
cancelled) exits 0 and says where it stopped; one that fails exits with the
status of its code.  A resume that lost a race for the run exits 75 and
says nothing: contention is not failure.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import click

from durability.cli import options
from durability.config import Settings
from durability.ground.errors import InvalidInput
from durability.ground.ids import safe_filename
from durability.ground.paths import ensure_private_dir
from durability.ground.store_errors import RunFailed, RunOwnerAlive, RunStillRunning
from durability.runs.budget import Limits
from durability.runs.execute import EngineConfig, resume_run, start_run
from durability.runs.fence import Claim, Owner, host_id
from durability.runs.run_rows import Runs
from durability.runs.runner import RunOutcome

__all__ = ["COMMANDS"]

# Imported with the CLI, before any work: the nearest we get to "when this
# process was asked" where /proc cannot say.
_IMPORTED_MS = time.time_ns() // 1_000_000


class Duration(click.ParamType):  # type: ignore[type-arg]
    """``500ms``, ``30s``, ``15m``, ``2h`` or plain seconds, as milliseconds."""

    name = "duration"
    _UNITS: ClassVar[dict[str, int]] = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "": 1000}

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        found = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|)\s*", str(value))
        if not found:
            raise InvalidInput(f"invalid duration {value!r}: use e.g. 500ms, 30s, 15m, 2h")
        return int(float(found.group(1)) * self._UNITS[found.group(2)])


def _process_start_ms() -> int:
    """When this process started (Linux: from /proc), so a claim another
    process took after we were asked counts as a lost race, not a refusal."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        age_s = uptime_s - started_ticks / os.sysconf("SC_CLK_TCK")
        return time.time_ns() // 1_000_000 - int(age_s * 1000)
    except (OSError, ValueError, IndexError):
        return _IMPORTED_MS


def _runs(settings: Settings) -> Runs:
    return Runs(settings.database)


def _config(settings: Settings, stale_after_ms: int | None = None) -> EngineConfig:
    from durability.worktree_ops.isolation import DurabilityIsolation
    from durability.worktree_ops.ops import DurabilityOps

    logging.basicConfig(level=logging.WARNING, format="durability: %(message)s")
    ops, isolation = DurabilityOps(settings), DurabilityIsolation(settings)
    agents = _agents()
    if stale_after_ms is None:
        return EngineConfig(ops=ops, isolation=isolation, agents=agents)
    return EngineConfig(ops=ops, stale_after_ms=stale_after_ms, isolation=isolation,
                        agents=agents)


def _agents() -> Any:
    """How agent tasks run here: the price table with the config file's
    ``[agents.prices]`` over it (docs/how-to/agents.md)."""
    from durability.config import config_tables
    from durability.runs.agent import AgentConfig

    path, data = config_tables()
    table = data.get("agents", {})
    prices = table.get("prices") if isinstance(table, dict) else None
    if prices is None:
        return AgentConfig()
    if not isinstance(prices, dict):
        raise InvalidInput(f"{path}: [agents.prices] must be a table of models")
    from durability.agents.prices import PriceTable

    return AgentConfig(price=PriceTable().with_overrides(prices).cost)


def _report(outcome: RunOutcome, as_json: bool) -> None:
    if as_json:
        data = dict(outcome.__dict__)
        if not data.pop("existing"):
            click.echo(json.dumps(data, indent=2))
        else:  # a start of a run that exists: said so, and never a failure
            click.echo(json.dumps({**data, "existing": True}, indent=2))
    elif outcome.existing:
        click.echo(f"{_describe(outcome)} (already started: nothing done; `durability "
                   f"run-status {outcome.run_id}`)")
    else:
        click.echo(_describe(outcome))
    if outcome.state == "failed" and not outcome.existing:
        error = outcome.error or {}
        raise RunFailed(str(error.get("message", "the run failed")),
                        code=str(error.get("code", "RUN_FAILED")), node_id=error.get("node_id"))


def _describe(o: RunOutcome) -> str:
    if o.state == "waiting-approval":
        return (f"run {o.run_id} waiting-approval on {o.waiting_on}: durability approve "
                f"{o.run_id} {o.waiting_on} (or deny), then durability resume {o.run_id}")
    if o.state == "waiting-quota":
        when = f"until {o.wake_at_ms} ms" if o.wake_at_ms else "for a person (no reset time)"
        return f"run {o.run_id} waiting-quota {when}"
    return f"run {o.run_id} {o.state}"


def _worktree(path: Path | None) -> str | None:
    from durability.backends import resolve_worktree
    from durability.ground.errors import CaptureError

    if path is not None:
        return str(resolve_worktree(path))
    try:
        return str(resolve_worktree(Path.cwd()))
    except CaptureError:
        return None  # a run without a worktree: nothing to checkpoint or restore


@click.command("run")
@click.argument("workflow", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--run-id", callback=options.run_id, help="Your own run id (default: a new one).")
@click.option("--worktree", type=click.Path(path_type=Path, file_okay=False),
              help="The jj worktree the tasks work in (default: the one here, if any).")
@click.option("--max-turns", type=click.IntRange(0), help="Abort past this many turns.")
@click.option("--max-tokens", type=click.IntRange(0), help="Abort past this many tokens.")
@click.option("--max-cost", type=click.FloatRange(0), help="Abort past this cost.")
@options.json_option
def run_command(workflow: Path, run_id: str | None, worktree: Path | None,
                max_turns: int | None, max_tokens: int | None, max_cost: float | None,
                as_json: bool) -> None:
    """Start a run of the workflow defined in WORKFLOW (a Python file).

    \b
    Example:
      durability run examples/workflow_hello.py --worktree .
    """
    settings = options.settings()
    with _runs(settings) as runs:
        outcome = start_run(runs, workflow.absolute(), config=_config(settings), run_id=run_id,
                            worktree=_worktree(worktree),
                            limits=Limits(max_turns, max_tokens, max_cost))
    _report(outcome, as_json)


@click.command("resume")
@click.argument("run_id", callback=options.run_id)
@click.option("--force", is_flag=True, help="Take the run over even if its owner looks alive.")
@click.option("--accept-workflow-change", is_flag=True,
              help="Resume although the workflow's files changed (paths must not).")
@click.option("--stale-after", type=Duration(), default="15m", show_default=True,
              help="A heartbeat older than this means the owner is gone.")
@click.option("--claim-epoch", type=click.IntRange(1), hidden=True)
@click.option("--claim-owner", hidden=True)
@click.option("--claim-started", is_flag=True, hidden=True)
@click.option("--quiet", is_flag=True,
              help="Another owner still working on the run (RUN_OWNER_ALIVE, "
                   "RUN_STILL_RUNNING) exits with its status and prints nothing.")
@options.json_option
def resume_command(run_id: str, force: bool, accept_workflow_change: bool, stale_after: int,
                   claim_epoch: int | None, claim_owner: str | None, claim_started: bool,
                   quiet: bool, as_json: bool) -> None:
    """Resume RUN_ID where it stopped: completed tasks are not run again.

    \b
    Example:
      durability resume RUN_ID
      durability resume RUN_ID --quiet || echo "exit $? (10/11: someone else has it)"
    """
    settings = options.settings()
    owner = Owner.this_process(claim_owner)
    with _runs(settings) as runs:
        try:
            outcome = resume_run(runs, run_id, config=_config(settings, stale_after),
                                 owner=owner, force=force,
                                 accept_workflow_change=accept_workflow_change,
                                 since_ms=_process_start_ms(), claim_epoch=claim_epoch,
                                 claim_started=claim_started)
        except (RunOwnerAlive, RunStillRunning) as exc:
            # "Another worker owns this run.  Say nothing": contention, not failure.
            exc.quiet = quiet
            raise
    _report(outcome, as_json)


@click.command("approve")
@click.argument("run_id", callback=options.run_id)
@click.argument("node_id", callback=options.run_id)
def approve_command(run_id: str, node_id: str) -> None:
    """Approve NODE_ID of RUN_ID; the next resume continues there.

    \b
    Example:
      durability approve RUN_ID deploy && durability resume RUN_ID
    """
    with _runs(options.settings()) as runs:
        runs.decide(run_id, node_id, "approved", None)
    click.echo(f"approved {node_id} of run {run_id}; continue with: durability resume {run_id}")


@click.command("deny")
@click.argument("run_id", callback=options.run_id)
@click.argument("node_id", callback=options.run_id)
@click.option("--reason", help="Why (kept with the decision).")
def deny_command(run_id: str, node_id: str, reason: str | None) -> None:
    """Deny NODE_ID of RUN_ID; the next resume fails the run there.

    \b
    Example:
      durability deny RUN_ID deploy --reason "not today"
    """
    with _runs(options.settings()) as runs:
        runs.decide(run_id, node_id, "denied", reason)
    click.echo(f"denied {node_id} of run {run_id}")


def _request(run_id: str, kind: str) -> None:
    with _runs(options.settings()) as runs:
        # An owner beats about once a second; ten missed beats means it is gone.
        done = runs.request(run_id, kind, live_within_ms=10_000)
    if done == "requested":
        click.echo(f"asked the owner of run {run_id} to {kind}")
    else:
        click.echo(f"run {run_id} {done}")


@click.command("pause")
@click.argument("run_id", callback=options.run_id)
def pause_command(run_id: str) -> None:
    """Start no new task; let running ones finish; park the run as paused.

    \b
    Example:
      durability pause RUN_ID
    """
    _request(run_id, "pause")


@click.command("cancel")
@click.argument("run_id", callback=options.run_id)
def cancel_command(run_id: str) -> None:
    """Tell running tasks to stop and mark the run cancelled (it can be resumed).

    \b
    Example:
      durability cancel RUN_ID
    """
    _request(run_id, "cancel")


def _launcher(settings: Settings) -> Any:
    def launch(claim: Claim) -> subprocess.Popen[bytes]:
        logs = ensure_private_dir(settings.state_dir / "runs")
        with open(logs / f"{safe_filename(claim.run_id)}.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-P", "-m", "durability", "resume", claim.run_id,
                 "--claim-epoch", str(claim.epoch), "--claim-owner", claim.owner.name,
                 "--quiet"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True)  # detached: it outlives the supervisor
    return launch


@click.command("supervise")
@click.argument("run_ids", nargs=-1, callback=lambda c, p, v: [options.run_id(c, p, x) for x in v])
@click.option("--all", "all_runs", is_flag=True, help="Every run (the default without RUN_IDS).")
@click.option("--stale-after", type=Duration(), default="30s", show_default=True)
@click.option("--max-concurrent", type=click.IntRange(1), default=3, show_default=True)
@click.option("--poll", type=Duration(), default="5s", show_default=True)
@click.option("--once", is_flag=True, help="Poll once and exit.")
@click.option("--id", "supervisor_id", help="This supervisor's id (default: host-pid).")
def supervise_command(run_ids: list[str], all_runs: bool, stale_after: int,
                      max_concurrent: int, poll: int, once: bool,
                      supervisor_id: str | None) -> None:
    """Resume runs whose owner stopped beating, and quota waits that are over.

    \b
    Example:
      durability supervise --all --stale-after 30s
    """
    import signal

    from durability.runs.supervise import Supervisor

    if run_ids and all_runs:
        raise InvalidInput("name runs or pass --all, not both")
    logging.basicConfig(level=logging.INFO, format="durability supervise: %(message)s")
    settings = options.settings()
    with _runs(settings) as runs:
        sup = Supervisor(runs, supervisor_id=supervisor_id or f"{host_id()}-"
                         f"{os.getpid()}", launch=_launcher(settings), stale_after_ms=stale_after,
                         max_concurrent=max_concurrent, run_ids=list(run_ids) or None)
        if once:
            for claim in sup.tick():
                click.echo(f"resumed {claim.run_id}")
            return
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        sup.run(stop, poll_s=poll / 1000)


@click.command("runs")
@options.json_option
def runs_command(as_json: bool) -> None:
    """List the engine's runs, newest first (hook sessions: `durability sessions`).

    \b
    Example:
      durability runs --json
    """
    with _runs(options.settings()) as runs:
        rows = [r.to_dict() for r in runs.list_runs()]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        click.echo("no runs", err=True)
    for r in rows:
        click.echo(f"{r['run_id']:<40} {r['state']:<17} {r['owner'] or '-':<30} "
                   f"{r['workflow_path']}")


@click.command("run-status")
@click.argument("run_id", callback=options.run_id)
@options.json_option
def run_status_command(run_id: str, as_json: bool) -> None:
    """A run's tasks, attempts (with jj_pointer and latest checkpoint) and outputs.

    \b
    Example:
      durability run-status RUN_ID
    """
    from durability.runs.status import run_status

    with _runs(options.settings()) as runs:
        status = run_status(runs, run_id)
    if as_json:
        click.echo(json.dumps(status, indent=2))
        return
    click.echo(f"run {status['run_id']}: {status['state']}  owner {status['owner'] or '-'}")
    if status.get("forked_from"):
        f = status["forked_from"]
        click.echo(f"  forked from {f['parent_run_id']} at {f['node_id']} it {f['iteration']} "
                   f"att {f['attempt']} seq {f['seq']} ({f['copied']} outputs copied)")
    for task in status["tasks"]:
        click.echo(f"  {task['id']:<24} {task['state']}")
        for w in task.get("worktrees", []):
            click.echo(f"    it {w['iteration']} isolated {w['kind']} worktree {w['state']}: "
                       f"{w['path']}")
        for a in task["attempts"]:
            cp = a["latest_checkpoint"]
            where = f"seq {cp['seq']} {cp['commit_id'][:12]}" if cp else "no checkpoint"
            click.echo(f"    it {a['iteration']} att {a['attempt']} {a['state']:<10} "
                       f"{(a['jj_pointer'] or '-')[:12]:<12} {where}")


COMMANDS = [run_command, resume_command, approve_command, deny_command, pause_command,
            cancel_command, supervise_command, runs_command, run_status_command]
