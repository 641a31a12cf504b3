"""The checkpoint commands: ``snapshot``, ``snapshots``, ``restore``, ``gaps``
and ``attempts``."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from durability import output
from durability.backends.base import MOVING
from durability.cli import options
from durability.ground import ids
from durability.store import AttemptKey, NotFound, Store

if TYPE_CHECKING:
    from durability.config import Settings
    from durability.restore.apply import Restored


@click.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--run", "run_id", required=True, callback=options.run_id, help="Run id.")
@options.attempt_options(node_required=True, defaults=True)
@click.option("--label", help="A label for the checkpoint.")
@options.json_option
def snapshot(path: Path | None, run_id: str, node_id: str, iteration: int, attempt: int,
             label: str | None, as_json: bool) -> None:
    """Take a checkpoint of the worktree at PATH (default: here) now.

    \b
    Example:
      durability snapshot . --run my-run --node main --label "before refactor"
    """
    from durability.capture.snapshot import snapshot_now
    from durability.cli.progress import Spinner

    where = path or Path.cwd()
    # A first capture of a large tree takes seconds and jj (or libgit2, or
    # the service) says nothing until it ends: a spinner on a terminal.
    with Spinner(f"capturing {ids.printable(str(where))}", quiet=as_json):
        result = snapshot_now(options.settings(),
                              key=AttemptKey(run_id, node_id, iteration, attempt),
                              path=where, label=label, request_id=str(uuid.uuid4()))
    if as_json:
        # The service's answer on the socket (a plain dict: see Outcome.to_dict).
        options.emit(result.to_dict())
    else:
        left = [s for s in result.skipped if s.reason != MOVING]
        moving = [s for s in result.skipped if s.reason == MOVING]
        # A checkpoint that left paths out, or read a tree still changing, is
        # never "unchanged": it may match the last one only for that reason.
        note = (f" ({len(left)} path(s) left out, see `durability gaps`)" if left
                else " (the tree was still changing: the next capture takes the rest)"
                if moving else " (unchanged: same as the latest checkpoint)"
                if result.deduped else "")
        click.echo(f"seq {result.seq} commit {(result.commit_id or '')[:12]}{note}")
        for item in left:
            click.echo(f"durability: {item.reason}: {ids.printable(item.path)} is not in the "
                       "checkpoint", err=True)


@click.command()
@click.option("--worktree", type=click.Path(path_type=Path, file_okay=False),
              help="Only sessions that touched this worktree.")
@options.json_option
def sessions(worktree: Path | None, as_json: bool) -> None:
    """List every run id with checkpoints or gaps (hook sessions too), newest first.

    \b
    Example:
      durability sessions --worktree .
    """
    store = options.store(options.settings())
    root = None
    if worktree is not None:
        from durability.backends import resolve_worktree

        root = str(resolve_worktree(worktree))
    rows = store.sessions(worktree=root)
    from durability.cli.table import sessions_table

    options.listing(rows, as_json, lambda: sessions_table(rows),
                    "no sessions recorded yet" + (f" for {root}" if root else ""),
                    lambda s: output.SessionOut.from_record(s))


@click.command()
@options.run_argument
@click.option("--node", "node_id", callback=options.run_id, help="Only this node.")
@options.json_option
def snapshots(run_id: str | None, latest: bool, node_id: str | None, as_json: bool) -> None:
    """List a run's checkpoints, by attempt then seq.

    \b
    Examples:
      durability snapshots --latest
      durability snapshots 4f1c0d2e-session-id --json
    """
    store = options.store(options.settings())
    run_id = options.resolve_run(store, run_id, latest)
    rows = store.checkpoints(run_id, node_id)
    if node_id is not None and not rows:
        # As show and restore say it: a node the run does not have is not
        # "no checkpoints yet" (exit 0), it is a name that points nowhere.
        nodes = sorted({c.node_id for c in store.checkpoints(run_id)})
        if nodes:
            raise NotFound(f"run {run_id!r} has no node {node_id!r} (its nodes: "
                           f"{', '.join(nodes)})")
    from durability.cli.table import checkpoints_table
    from durability.store.remote_rows import Remotes

    # {remote: pushed | pending | failed}; {} when the worktree has no remote.
    states = Remotes(store.location).states(rows) if as_json else {}
    options.listing(rows, as_json, lambda: checkpoints_table(rows),
                    f"no checkpoints for run {run_id}",
                    lambda r: output.CheckpointListedOut.from_record(
                        r, replicated=states.get(r.request_id, {})))


@click.command()
@options.run_argument
@options.attempt_options(node_required=False, defaults=False)
@click.option("--seq", type=click.IntRange(1), help="Checkpoint seq (default: the latest).")
@click.option("--worktree", type=click.Path(path_type=Path),
              help="Restore into this worktree (default: where it was captured).")
@click.option("--path", "paths", multiple=True, metavar="PATH",
              help="Restore only this file or folder (relative to the current folder "
                   "inside the worktree, else to its root); repeat for more.")
@click.option("--dry-run", is_flag=True,
              help="List what would be written, deleted or left; change nothing.")
@click.option("--from-remote", "from_remote", metavar="NAME",
              help="Fetch RUN's checkpoints from remote NAME first (another machine: a "
                   "fresh clone or an empty folder; see `durability remote`).")
@options.json_option
def restore(run_id: str | None, latest: bool, node_id: str | None, iteration: int | None,
            attempt: int | None, seq: int | None, worktree: Path | None,
            paths: tuple[str, ...], dry_run: bool, from_remote: str | None,
            as_json: bool) -> None:
    """Restore a worktree to a checkpoint (a pre-restore checkpoint is taken first).

    --node may be left out when the run has one node (a hook session's is
    its agent).  Every restore can be undone: run the undo it prints,
    --path restores too (after --from-remote the undo names a run of its
    own, never RUN's chain).  --dry-run takes no checkpoint.

    \b
    Examples:
      durability restore --latest --seq 3
      durability restore RUN --node agent --seq 3
      durability restore --latest --seq 3 --dry-run
      durability restore --latest --seq 3 --path src/app.py --path docs
      durability restore RUN --from-remote backup --worktree ./empty-folder
    """
    from durability.cli.progress import Bar
    from durability.cli.restore_output import preview_dict, preview_lines, restored_dict
    from durability.restore.apply import preview
    from durability.restore.apply import restore as do_restore

    settings = options.settings()
    store = options.store(settings)
    if from_remote is not None:
        worktree = _fetch_from_remote(settings, from_remote, run_id, latest, worktree)
    run_id = options.resolve_run(store, run_id, latest)
    which: dict[str, Any] = {
        "run_id": run_id, "node_id": node_id or options.only_node(store, run_id),
        "iteration": iteration, "attempt": attempt, "seq": seq,
        "worktree": str(worktree) if worktree else None,
        "paths": _from_here(store, paths, worktree, run_id, node_id, iteration, attempt, seq)}
    if dry_run:
        seen = preview(settings, **which)
        if as_json:
            return options.emit(preview_dict(seen))
        return click.echo("\n".join(preview_lines(seen)))
    pre_key = None
    if from_remote is not None:
        from durability.remote.fetch import pre_restore_key

        # Its own run: the restored run's chain is the other machine's.
        pre_key = pre_restore_key(run_id, which["node_id"])
    with Bar("restoring", quiet=as_json) as bar:
        done = do_restore(settings, progress=bar, pre_restore_key=pre_key, **which)
    if as_json:
        return options.emit(restored_dict(done))
    at = f" at {', '.join(map(ids.printable, done.paths))}" if done.paths else ""
    click.echo(f"restored {ids.printable(done.worktree)}{at} to seq {done.restored.seq} "
               f"({done.restored.commit_id[:12]}): {len(done.changes.write)} written, "
               f"{len(done.changes.delete)} deleted; undo: {_undo_command(done)}")


def _from_here(store: Store, paths: tuple[str, ...], worktree: Path | None, run_id: str,
               node_id: str | None, iteration: int | None, attempt: int | None,
               seq: int | None) -> list[str] | None:
    """``--path`` values as the library takes them: a relative one starts at
    the current folder when that is inside the worktree (as in git, and as
    ``diff -- PATHS``), else at the worktree's root."""
    if not paths:
        return None
    from durability.backends import resolve_worktree
    from durability.restore.apply import find_checkpoint, recorded_root

    if worktree is None:
        target = find_checkpoint(store, run_id=run_id,
                                 node_id=node_id or options.only_node(store, run_id),
                                 iteration=iteration, attempt=attempt, seq=seq)
        root = recorded_root(store, target)
    else:
        root = resolve_worktree(worktree)
    start = options.anchor(root)
    # An empty path stays empty, so the library refuses it as unusable.
    return [os.path.join(start, p) if p else p for p in paths]


def _fetch_from_remote(settings: Settings, name: str, run_id: str | None, latest: bool,
                       worktree: Path | None) -> Path:
    """Fetch the run's checkpoints from remote ``name`` into the worktree
    (default: here) and record them; the worktree the restore then uses."""
    from durability.ground.errors import InvalidInput
    from durability.remote.fetch import fetch_run

    if run_id is None or latest:
        raise InvalidInput("--from-remote needs the RUN id (this machine's record does "
                           "not know the remote's runs)")
    try:
        name = ids.remote_name(name)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return fetch_run(settings, name=name, run_id=run_id, folder=worktree or Path.cwd()).worktree


def _undo_command(done: Restored) -> str:
    """The restore that undoes ``done``: its pre-restore seq lives in the
    restored checkpoint's attempt (which need not be the latest one), or in a
    run of its own after ``--from-remote``."""
    r = done.undo_key
    return (f"durability restore {ids.printable(r.run_id)} --node {ids.printable(r.node_id)} "
            f"--iteration {r.iteration} --attempt {r.attempt} --seq {done.pre_restore_seq}")


@click.command()
@options.run_argument
@options.json_option
def gaps(run_id: str | None, latest: bool, as_json: bool) -> None:
    """List the captures of a run that could not be taken.

    \b
    Example:
      durability gaps --latest
    """
    from durability.gaps.ingest import ingest_spool

    settings = options.settings()
    store = options.store(settings)
    ingested = ingest_spool(store, settings.spool_dirs)
    for reason in ingested.skipped:
        click.echo(f"durability: spool folder skipped: {reason}", err=True)
    if ingested.torn:
        click.echo(f"durability: skipped {ingested.torn} torn spool line(s)", err=True)
    run_id = options.resolve_run(store, run_id, latest)
    rows = store.gaps(run_id)
    from durability.cli.table import gaps_table

    options.listing(rows, as_json, lambda: gaps_table(rows), f"no gaps for run {run_id}",
                    lambda g: output.GapOut.from_record(g))


@click.command()
@options.run_argument
@options.json_option
def attempts(run_id: str | None, latest: bool, as_json: bool) -> None:
    """List a run's attempts with their jj_pointer.

    \b
    Example:
      durability attempts --latest
    """
    store = options.store(options.settings())
    rows = store.attempts(options.resolve_run(store, run_id, latest))
    from durability.cli.table import attempts_table

    options.listing(rows, as_json, lambda: attempts_table(rows),
                    f"no attempts for run {run_id}",
                    lambda a: output.AttemptOut.from_record(a))


COMMANDS = [sessions, snapshot, snapshots, restore, gaps, attempts]
