"""``durability fork``: a new run from a checkpoint of an old one
(``durability.runs.fork``), its worktree restored to that checkpoint first."""

from __future__ import annotations

import click

from durability.cli import options
from durability.cli.runs import _config, _report, _runs
from durability.config import Settings
from durability.runs.fork import Restore, fork_run
from durability.store.models import Checkpoint

__all__ = ["COMMANDS"]


def _restorer(settings: Settings) -> Restore:
    def restore_to(point: Checkpoint, worktree: str) -> str:
        from durability.restore.apply import restore

        done = restore(settings, run_id=point.run_id, node_id=point.node_id,
                       iteration=point.iteration, attempt=point.attempt, seq=point.seq,
                       worktree=worktree)
        return (f"restored {done.worktree} to {point.node_id} iteration {point.iteration} "
                f"attempt {point.attempt} seq {point.seq} (undo: seq {done.pre_restore_seq})")
    return restore_to


@click.command("fork")
@click.argument("run_id", callback=options.run_id)
@click.option("--node", "node_id", required=True, callback=options.run_id,
              help="The task whose checkpoint the new run starts from (it runs again).")
@click.option("--iteration", type=click.IntRange(0),
              help="Its iteration (default: the newest with checkpoints).")
@click.option("--seq", type=click.IntRange(1),
              help="The checkpoint of its newest attempt (default: the last; a "
                   "restore's pre-restore checkpoint is never a fork's point).")
@click.option("--run-id", "new_id", callback=options.run_id,
              help="The new run's id (default: a new one).")
@options.json_option
def fork_command(run_id: str, node_id: str, iteration: int | None, seq: int | None,
                 new_id: str | None, as_json: bool) -> None:
    """Fork RUN_ID at a checkpoint of a task into a new run, under the
    workflow file as it is now.

    Tasks RUN_ID had completed before that checkpoint keep their outputs
    (copied, not re-run); the worktree is restored to the checkpoint; the
    task and everything after it run again.

    \b
    Example:
      durability fork RUN_ID --node fix --seq 2 --run-id try-2
    """
    settings = options.settings()
    with _runs(settings) as runs:
        outcome = fork_run(runs, run_id, node_id=node_id, iteration=iteration, seq=seq,
                           new_id=new_id, config=_config(settings),
                           restore=_restorer(settings))
    _report(outcome, as_json)


COMMANDS = [fork_command]
