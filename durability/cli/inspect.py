"""The read commands: ``show`` (one checkpoint and what it changed), ``diff``
(two checkpoints, or one and the worktree) and ``log`` (a worktree's
timeline).  None of them writes to a worktree or records a checkpoint (``log``
takes the gap spool into the store first, as ``gaps`` does);
docs/how-to/inspect.md documents their output."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from durability.cli import options
from durability.ground import ids
from durability.ground.errors import DurabilityError, InvalidInput
from durability.store import Checkpoint, Store

if TYPE_CHECKING:
    from durability.inspect.diff import Changes
    from durability.inspect.timeline import Entry, Shown
    from durability.store.boundaries import Boundary


def _find(store: Store, run_id: str, node_id: str | None, iteration: int | None,
          attempt: int | None, seq: int | None) -> Checkpoint:
    from durability.restore.apply import find_checkpoint

    def find() -> Checkpoint:
        return find_checkpoint(store, run_id=run_id,
                               node_id=node_id or options.only_node(store, run_id),
                               iteration=iteration, attempt=attempt, seq=seq)

    found = find()
    if not os.path.isdir(found.worktree):
        # Its worktree moved here: its records follow it (capture.moved).
        from durability.backends import resolve_worktree
        from durability.capture.moved import follow

        try:
            if follow(store, resolve_worktree(Path.cwd()), create=False) == found.worktree:
                return find()
        except DurabilityError:
            pass  # not in a worktree: the checkpoint's own path says it is gone
    return found


@click.command()
@options.run_argument
@options.attempt_options(node_required=False, defaults=False)
@click.option("--seq", type=click.IntRange(1), help="Checkpoint seq (default: the latest).")
@options.json_option
def show(run_id: str | None, latest: bool, node_id: str | None, iteration: int | None,
         attempt: int | None, seq: int | None, as_json: bool) -> None:
    """Show one checkpoint and the files it changed.

    The files are compared with the previous checkpoint of its attempt (an
    attempt's first checkpoint: with the newest earlier checkpoint of the
    same worktree).  --node may be left out when the run has one node.

    \b
    Examples:
      durability show --latest
      durability show RUN --seq 3 --json
    """
    from durability.inspect.timeline import describe

    store = options.store(options.settings())
    run_id = options.resolve_run(store, run_id, latest)
    shown = describe(store, _find(store, run_id, node_id, iteration, attempt, seq))
    from durability.store.remote_rows import Remotes

    # {remote: pushed | pending | failed} (docs/how-to/remote.md); {} without a remote.
    replicated = Remotes(store.location).states([shown.checkpoint]).get(
        shown.checkpoint.request_id, {})
    calls = _calls_of(store, [shown.checkpoint]).get(_point(shown.checkpoint), [])
    if as_json:
        return options.emit(_shown(shown, replicated, calls))
    click.echo(_show_text(shown, replicated, calls))


def _point(c: Checkpoint) -> tuple[object, int]:
    return (c.key, c.seq)


def _calls_of(store: Store, rows: Iterable[Checkpoint]) -> dict[tuple[object, int],
                                                                list[Boundary]]:
    """The tool-call boundaries naming each of ``rows`` (issue 24)."""
    from durability.store.boundaries import by_checkpoint

    found: dict[tuple[object, int], list[Boundary]] = dict(
        by_checkpoint(store, {c.run_id for c in rows}))  # type: ignore[arg-type]
    return found


def _calls_text(calls: Sequence[Boundary]) -> str:
    return ", ".join(f"seq {b.seq} ({b.tool_use_id or '-'} {b.tool_name or ''})".replace(" )", ")")
                     for b in calls)


def _show_text(shown: Shown, replicated: dict[str, str],
               calls: Sequence[Boundary] = ()) -> str:
    from durability.cli.table import changes_table, printable, totals_text, when

    c, base = shown.checkpoint, shown.base
    fields = [("seq", str(c.seq)), ("run", c.run_id),
              ("attempt", f"node {c.node_id}, iteration {c.iteration}, attempt {c.attempt}"),
              ("commit", c.commit_id), ("time", when(c.created_at_ms)), ("source", c.source),
              ("label", c.label or "-"), ("tool call", c.tool_use_id or "-")]
    fields += [(k, v) for k, v in (("harness", c.harness), ("agent id", c.agent_id),
                                   ("agent type", c.agent_type)) if v]
    fields.append(("worktree", c.worktree))
    if calls:
        fields.append(("boundaries", _calls_text(calls)))
    if replicated:
        fields.append(("replicated", ", ".join(f"{k} {v}" for k, v in sorted(replicated.items()))))
    if base is None or shown.changes is None:
        fields.append(("changes", "none listed: the first checkpoint of this worktree"))
    else:
        fields.append(("changes", f"{totals_text(shown.changes.totals())} against "
                                  f"{_base_name(c, base)}"))
    lines = [f"{k + ':':<12}{printable(ids.printable(v))}" for k, v in fields]
    if shown.changes is not None and shown.changes.files():
        lines += ["", changes_table(shown.changes.files())]
    return "\n".join(lines)


def _base_name(c: Checkpoint, base: Checkpoint) -> str:
    if base.key == c.key:
        return f"seq {base.seq}"
    return (f"seq {base.seq} of run {base.run_id} node {base.node_id} "
            f"iteration {base.iteration} attempt {base.attempt}")


@click.command()
@click.option("--latest", is_flag=True,
              help="The newest session of the worktree here (instead of RUN).")
@options.attempt_options(node_required=False, defaults=False)
@click.option("--seq", type=click.IntRange(1), help="Checkpoint seq A (default: the latest).")
@click.option("--to", "to_seq", type=click.IntRange(1), help="Compare A with seq B.")
@click.option("--worktree", "to_worktree", is_flag=True,
              help="Compare A with the worktree as it is now (nothing is captured).")
@click.option("--stat", is_flag=True, help="One line per file: status, line counts (a file "
              "over 8 MiB: its sizes, not compared), path.")
@click.option("--name-only", is_flag=True, help="Only the changed paths, one per line.")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True, help="Colour the diff (auto: on a terminal, unless NO_COLOR).")
@options.json_option
@click.argument("args", nargs=-1, metavar="[RUN] [-- PATHS...]")
def diff(latest: bool, node_id: str | None, iteration: int | None, attempt: int | None,
         seq: int | None, to_seq: int | None, to_worktree: bool, stat: bool, name_only: bool,
         color: str, as_json: bool, args: tuple[str, ...]) -> None:
    """Show the changes between two checkpoints, or a checkpoint and the worktree.

    Without --to or --worktree: what seq A changed (as `show` lists it).
    PATHS limit the diff (a folder: everything under it); they are relative
    to the current folder when it is inside the worktree (with --latest,
    every argument is a path).  Binary files are named, never dumped.

    \b
    Examples:
      durability diff --latest --seq 2 --to 5
      durability diff RUN --seq 3 --worktree --stat -- src/
    """
    if to_seq is not None and to_worktree:
        raise InvalidInput("give --to or --worktree, not both")
    if stat and name_only:
        raise InvalidInput("give --stat or --name-only, not both")
    run_id, paths = (None, args) if latest else (args[0] if args else None, args[1:])
    store = options.store(options.settings())
    run_id = options.resolve_run(store, _validated(run_id), latest)
    a = _find(store, run_id, node_id, iteration, attempt, seq)
    from durability.cli.progress import Spinner

    # Comparing with the worktree hashes every file of it (libgit2 says
    # nothing until done): a spinner on a terminal.
    with Spinner("comparing", quiet=as_json):
        changes, old, new = _changes(store, a, to_seq, to_worktree,
                                     _relative(paths, Path(a.worktree)))
    if changes is None:
        click.echo(f"durability: seq {a.seq} is the first checkpoint of {a.worktree}: nothing "
                   "earlier to compare with (try --to or --worktree)", err=True)
    if as_json:
        return options.emit(_json(changes, old, new))
    if changes is not None:
        _print_changes(changes, stat=stat, name_only=name_only, color=color)


def _validated(run_id: str | None) -> str | None:
    """RUN, validated as ``options.run_argument`` validates it (here it
    shares the positional arguments with PATHS)."""
    if run_id is None:
        return None
    try:
        return ids.validate_id(run_id, "run id")
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


#: A side of a diff: a checkpoint, ``"worktree"`` (the files now), or None (no base).
_Side = Checkpoint | str | None


def _json(changes: Changes | None, old: _Side, new: _Side) -> dict[str, object]:
    """``diff --json``: the two sides, the files and their totals."""
    from durability import output

    def side(c: _Side) -> output.SideOut | str | None:
        return c if c is None or isinstance(c, str) else output.SideOut.of(c)

    files, totals = output.files_out(changes)
    return output.ChangesOut.model_validate({"from": side(old), "to": side(new),
                                             "files": files, "totals": totals}).dump()


def _shown(shown: Shown, replicated: dict[str, str],
           calls: Sequence[Boundary] = ()) -> dict[str, object]:
    """``show --json``: the whole checkpoint, its base, what it changed."""
    from durability import output

    files, totals = output.files_out(shown.changes)
    out: dict[str, object] = output.ShownOut.from_record(
        shown.checkpoint, base=output.SideOut.of(shown.base), files=files, totals=totals,
        replicated=replicated,
        boundaries=[output.BoundaryRefOut.of(b) for b in calls]).dump()
    return out


def _changes(store: Store, a: Checkpoint, to_seq: int | None, to_worktree: bool,
             paths: Sequence[str]) -> tuple[Changes | None, _Side, _Side]:
    """The changes asked for, with their old and new sides as --json names
    them (None: no base; ``"worktree"``: the files now)."""
    from durability.inspect import compare
    from durability.inspect.timeline import describe

    if to_worktree:
        return compare.with_worktree(a, paths=paths), a, "worktree"
    if to_seq is not None:
        b = store.checkpoint(a.key, to_seq)
        return compare.checkpoints(a, b, paths=paths), a, b
    shown = describe(store, a, paths=paths)
    return shown.changes, shown.base, a


def _print_changes(changes: Changes, *, stat: bool, name_only: bool, color: str) -> None:
    from durability.cli.progress import MIN_STEPS, Bar
    from durability.cli.table import changes_table, printable

    patches: Iterable[bytes] = ()
    with Bar("comparing files") as bar:
        if stat or name_only:
            changes.files(progress=bar)
        else:
            patches = changes.patches(progress=bar)
            if bar.enabled and len(changes) >= MIN_STEPS:
                # Made whole before a line is printed: a bar redrawn between
                # the lines of a diff on the same terminal would garble both.
                patches = list(patches)
    if name_only:
        for f in changes.files():
            click.echo(printable(ids.printable(f.path)))
    elif stat:
        if changes.files():
            click.echo(changes_table(changes.files()))
            t = changes.totals()
            click.echo(f"{t.files} file{'' if t.files == 1 else 's'} changed, "
                       f"+{t.additions} -{t.deletions}")
    else:
        _write(patches, _coloured(color))


def _relative(paths: Sequence[str], root: Path) -> list[str]:
    """PATHS as worktree-relative paths: relative to the current folder when
    it is inside the worktree, else to the worktree's root."""
    start = options.anchor(root)
    out = []
    for p in paths:
        full = os.path.normpath(os.path.join(start, p))
        rel = os.path.relpath(full, root)
        if rel == os.curdir:
            return []  # the whole worktree
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise InvalidInput(f"{p} is outside the worktree {root}")
        out.append(rel.replace(os.sep, "/"))
    return out


def _coloured(choice: str) -> bool:
    if choice != "auto":
        return choice == "always"
    # https://no-color.org: any non-empty NO_COLOR turns colour off.
    return not os.environ.get("NO_COLOR") and sys.stdout.isatty()


def _write(patches: Iterable[bytes], colour: bool) -> None:
    # Bytes as they are: a file's content need not be UTF-8.
    out = sys.stdout.buffer
    for patch in patches:
        out.write(_paint(patch) if colour else patch)
    out.flush()


_HEADER = (b"diff --git", b"index ", b"--- ", b"+++ ", b"old mode", b"new mode",
           b"new file mode", b"deleted file mode", b"similarity", b"rename ", b"Binary files")


def _paint(patch: bytes) -> bytes:
    """git's colours: headers bold, hunk lines cyan, additions green,
    deletions red.  A ``---`` inside a hunk is a deleted line, not a header."""
    out, in_hunk = [], False
    for line in patch.splitlines(keepends=True):
        body = line.rstrip(b"\n")
        end = line[len(body):]
        if line.startswith(b"diff --git"):
            in_hunk = False
        if line.startswith(b"@@"):
            in_hunk = True
            out.append(b"\x1b[36m" + body + b"\x1b[m" + end)
        elif not in_hunk and line.startswith(_HEADER):
            out.append(b"\x1b[1m" + body + b"\x1b[m" + end)
        elif in_hunk and line.startswith(b"+"):
            out.append(b"\x1b[32m" + body + b"\x1b[m" + end)
        elif in_hunk and line.startswith(b"-"):
            out.append(b"\x1b[31m" + body + b"\x1b[m" + end)
        else:
            out.append(line)
    return b"".join(out)


#: ``log``'s default number of entries: a long-lived worktree has thousands,
#: each compared with its base.
LOG_LIMIT = 50


@click.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--limit", type=click.IntRange(1), default=LOG_LIMIT, show_default=True,
              help="Only the newest N entries.")
@click.option("--all", "every", is_flag=True, help="Every entry (no limit).")
@options.json_option
def log(path: Path | None, limit: int, every: bool, as_json: bool) -> None:
    """The timeline of the worktree at PATH (default: here), newest first.

    One line per checkpoint, across sessions and attempts: time, run,
    attempt, seq, source, what it changed (files, and by how many bytes their
    size moved: read from the trees, never the files' contents; `show`
    counts lines) and label.  Captures that could not be taken are marked
    GAP where they happened; tool calls whose checkpoint gc collected are
    marked GC (their files cannot be restored; `rewind --conversation-only`
    still rewinds their conversation).  The newest 50 entries unless --limit
    or --all says otherwise.

    \b
    Examples:
      durability log
      durability log ../other-worktree --limit 20 --json
      durability log --all
    """
    from durability.backends import resolve_worktree
    from durability.cli.progress import Bar
    from durability.cli.table import timeline_table
    from durability.inspect.timeline import timeline

    given = click.get_current_context().get_parameter_source("limit")
    if every and given is not click.core.ParameterSource.DEFAULT:
        raise InvalidInput("give --limit or --all, not both")
    if path is not None and path.exists() and not path.is_dir():
        # As one types `git log FILE`: log is a whole worktree's timeline.
        raise InvalidInput(f"log takes a folder (the timeline is its worktree's), not the file "
                           f"{ids.printable(str(path))}; what one checkpoint did to a file: "
                           f"durability diff RUN --seq S -- FILE")
    settings = options.settings()
    store = options.store(settings)
    root = resolve_worktree(path or Path.cwd())
    from durability.capture.moved import follow

    follow(store, root, create=False)  # a worktree moved here: its records follow it
    # Gaps still in the spool belong in the timeline too.
    from durability.gaps.ingest import ingest_spool

    ingest_spool(store, settings.spool_dirs)
    with Bar("reading the timeline", quiet=as_json) as bar:
        # One more than shown, to know whether older entries were left out.
        entries = timeline(store, root, limit=None if every else limit + 1, progress=bar,
                           collected=True)
    more = not every and len(entries) > limit
    entries = entries[:limit] if more else entries
    from durability import output

    calls = _calls_of(store, [e.checkpoint for e in entries if e.checkpoint is not None])

    def of(e: Entry) -> list[Boundary]:
        return calls.get(_point(e.checkpoint), []) if e.checkpoint is not None else []

    options.listing(entries, as_json, lambda: timeline_table(entries, boundaries=of),
                    f"nothing recorded yet for {root}; a checkpoint recorded in another "
                    f"worktree restores here with: durability restore RUN --seq N "
                    f"--worktree {root}", lambda e: output.entry_out(e, of(e)))
    collected = [e.call for e in entries if e.call is not None]
    if collected and not as_json:
        b = collected[0]  # the newest: the command names a real one
        click.echo(f"durability: GC: a tool call whose checkpoint gc collected: its files "
                   f"cannot be restored; its conversation can: durability rewind "
                   f"{ids.printable(b.run_id)} --seq {b.seq} --conversation-only", err=True)
    if more and not as_json:
        click.echo(f"durability: the newest {limit} entries; older ones: --limit N or --all",
                   err=True)


COMMANDS = [show, diff, log]
