"""The ``forget`` command: take paths out of every checkpoint (docs/how-to/forget.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from durability.cli import options
from durability.ground import ids

__all__ = ["COMMANDS"]


@click.command()
@click.argument("paths", nargs=-1, required=True)
@click.option("--worktree", type=click.Path(path_type=Path, file_okay=False),
              help="The worktree whose checkpoints to rewrite (default: the one here).")
@click.option("--run", "run_id", callback=options.run_id,
              help="Only the checkpoints of this run.")
@click.option("--dry-run", is_flag=True,
              help="List the checkpoints that hold the paths; change nothing.")
@options.json_option
def forget(paths: tuple[str, ...], worktree: Path | None, run_id: str | None, dry_run: bool,
           as_json: bool) -> None:
    """Remove PATHS from every checkpoint of a worktree, here and on its remotes.

    Each checkpoint holding one of PATHS (relative to the current folder
    when it is inside the worktree, else to its root; a folder is everything
    below it) is written again
    without it: seqs, labels and undo points stay. The objects are pruned at
    once, and on each remote of the worktree our refs are replaced so that
    nothing there reaches them. The paths must be gone from the worktree
    first. A path no checkpoint holds is not an error: nothing is done.

    \b
    Example:
      durability forget .env --dry-run
      durability forget .env secrets/ --run RUN --json
    """
    from durability.backends import resolve_worktree
    from durability.remote.transport import RemoteFailed
    from durability.retention.forget import run_forget

    settings = options.settings()
    root = resolve_worktree(worktree if worktree is not None else Path.cwd())
    # As restore --path and diff -- PATHS: a relative path starts at the
    # current folder when that is inside the worktree, else at its root.
    start = options.anchor(root)
    given = [os.path.join(start, p) if p else p for p in paths]
    report = run_forget(settings, options.store(settings), root, given, run_id=run_id,
                        dry_run=dry_run)
    if as_json:
        options.emit(report.to_dict())
    else:
        click.echo(_summary(report.to_dict()))
    failed = report.remote_failed
    if failed:
        raise RemoteFailed(f"remote {failed[0]['name']} still holds the old refs: "
                           f"{failed[0]['error']} (run forget again to retry)")


def _summary(data: dict[str, Any]) -> str:
    paths = ", ".join(ids.printable(p) for p in data["paths"])
    where = ids.printable(data["worktree"])
    cps = data["checkpoints"]
    lines = []
    if not cps:
        lines.append(f"nothing to forget: no checkpoint of {where} holds {paths}")
    elif data["dry_run"]:
        lines.append(f"would forget {paths} from {len(cps)} checkpoints of {where}:")
        lines += [f"  {ids.printable(c['run_id'])} --node {ids.printable(c['node_id'])} "
                  f"--iteration {c['iteration']} --attempt {c['attempt']} --seq {c['seq']} "
                  f"({c['commit_id'][:12]})" for c in cps]
    else:
        lines.append(f"forgot {paths} from {len(cps)} checkpoints of {where} "
                     f"({data['commits_rewritten']} commits rewritten, "
                     f"{data['rows_renamed']} checkpoints renamed; seqs kept)")
    for r in data["remotes"]:
        if r["error"]:
            lines.append(f"remote {ids.printable(r['name'])}: not updated: "
                         f"{ids.printable(r['error'])}")
        else:
            lines.append(f"remote {ids.printable(r['name'])}: {r['refs_replaced']} refs "
                         f"replaced, {r['refs_deleted']} deleted")
    if not data["dry_run"] and data["blobs"]:
        left = data["blobs_left"]
        lines.append(f"objects: {data['blobs'] - len(left)} of {data['blobs']} blobs gone"
                     + (f"; still in the store (held by something outside the toolkit's "
                        f"refs): {', '.join(b[:12] for b in left)}" if left else ""))
    lines += [f"note: {ids.printable(n)}" for n in data["notes"]]
    return "\n".join(lines)


COMMANDS = [forget]
