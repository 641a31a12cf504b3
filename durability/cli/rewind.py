"""``durability rewind``: the code and the conversation back to one tool call
(docs/how-to/rewind.md)."""

from __future__ import annotations

import shlex

import click

from durability.cli import options
from durability.ground import ids


@click.command()
@options.run_argument
@click.option("--seq", type=click.IntRange(1), help="The session's boundary seq.")
@click.option("--call", "call", help="The tool call id (tool_use_id) to go back to.")
@click.option("--code-only", is_flag=True, help="Only the files (any harness, any version).")
@click.option("--conversation-only", is_flag=True,
              help="Only the conversation (a new session); the files stay.")
@click.option("--dry-run", is_flag=True,
              help="List the files and the conversation turns a rewind would change.")
@options.json_option
def rewind(run_id: str | None, latest: bool, seq: int | None, call: str | None,
           code_only: bool, conversation_only: bool, dry_run: bool, as_json: bool) -> None:
    """Go back to right after one tool call: the files as they were then, and
    a new session of the agent whose conversation ends with that call's result.

    Every tool call a hook reported is a boundary (`durability log`, `show`
    and `browse` list them; `log` and `browse` mark GC a call whose checkpoint
    gc collected: only --conversation-only rewinds it); name one by --seq or
    --call.  The files are restored as `restore` does (a pre-restore
    checkpoint first: the undo is printed); the original session is never
    changed, and the new one is resumed with the command printed.  A
    transcript format not tested is refused (conversation-unsupported)
    before anything changes: --code-only still rewinds the files.

    \b
    Examples:
      durability rewind SESSION --call toolu_01ABC
      durability rewind --latest --seq 4 --dry-run
      durability rewind SESSION --seq 4 --code-only --json
    """
    from durability.rewind.apply import rewind as do_rewind

    settings = options.settings()
    store = options.store(settings)
    session = options.resolve_run(store, run_id, latest)
    done = do_rewind(settings, store, session, seq=seq, call=call, code=not conversation_only,
                     conversation=not code_only, dry_run=dry_run)
    if as_json:
        from durability import output

        return options.emit(output.RewoundOut.of(done).dump())
    click.echo("\n".join(ids.printable(line) for line in _lines(done)))


def _lines(done: object) -> list[str]:
    from durability.cli.restore_output import preview_lines
    from durability.rewind.apply import Rewound
    from durability.rewind.conversation import describe_turn

    assert isinstance(done, Rewound)
    b = done.boundary
    call = f"tool call {b.tool_use_id}" if b.tool_use_id else "a call without an id"
    lines = [f"boundary seq {b.seq} of session {b.run_id}: {call} ({b.tool_name or '?'}), "
             f"checkpoint seq {b.checkpoint_seq} ({b.commit_id[:12]})"]
    if done.preview is not None:
        lines += preview_lines(done.preview)
    if done.restored is not None:
        r, k = done.restored, done.restored.undo_key
        lines.append(f"files: {ids.printable(r.worktree)} rewound to seq {r.restored.seq}: "
                     f"{len(r.changes.write)} written, {len(r.changes.delete)} deleted; undo: "
                     f"durability restore {k.run_id} --node {k.node_id} --iteration "
                     f"{k.iteration} --attempt {k.attempt} --seq {r.pre_restore_seq}")
    p = done.conversation
    if p is not None:
        verb = "would drop" if done.dry_run else "dropped"
        lines.append(f"conversation ({p.harness} {', '.join(p.versions)}): {p.kept_lines} "
                     f"lines kept, {verb} {len(p.dropped)} turns after {p.call_id}")
        lines += [f"  {describe_turn(t)}" for t in p.dropped]
    if done.written is not None:
        w = done.written
        where = f"cd {shlex.quote(p.cwd)} && " if p is not None and p.cwd else ""
        lines.append(f"new session {w.session_id} (the original is unchanged); continue it "
                     f"with: {where}{shlex.join(w.resume)}")
    return lines


COMMANDS = [rewind]
