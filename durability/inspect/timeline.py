"""A worktree's timeline, and what each checkpoint changed.

Every checkpoint is compared with its *base*: the previous checkpoint of its
own attempt; for an attempt's first checkpoint, the newest earlier checkpoint
of the same worktree (another session's, or an earlier attempt's); for the
first checkpoint the worktree ever had, nothing (no base, no changes listed:
what came before the toolkit was watching is not a checkpoint's doing).

``timeline`` lists a worktree's checkpoints and gaps across sessions and
attempts, newest first, each checkpoint with what it changed: how many paths
and their sizes (``diff.Sizes``), read from the trees' entries and the
objects' headers, never a file's content, so a history of large files lists
as fast as one of small ones (decision 0051; ``show`` and ``diff`` count
lines).

With ``collected=True`` (``log`` and ``browse``) the timeline also holds the
tool calls whose checkpoint gc collected (decision 0061): a boundary that
names no commit any more, at the time it was recorded, so a call that was
there before gc is still found where it happened.  One query for them all,
no repository read: they have no tree to compare.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pygit2

from durability.backends import Progress
from durability.ground.errors import DurabilityError
from durability.inspect.compare import in_repository
from durability.inspect.diff import Changes, Sizes, sizes_between
from durability.inspect.repository import commit_tree, open_checkpoints
from durability.store import AttemptKey, Checkpoint, Gap, NotFound, Store
from durability.store.boundaries import Boundary, collected_boundaries

__all__ = ["COLLECTED_CHANGES", "COLLECTED_MARK", "Entry", "Shown", "base_of", "bases",
           "collected_label", "describe", "run_timeline", "timeline", "timeline_order"]

#: What a listing shows of a collected call (decision 0061): in its seq
#: column, as a gap shows ``GAP``, and in its changes column.
COLLECTED_MARK = "GC"
COLLECTED_CHANGES = "collected"


def collected_label(b: Boundary) -> str:
    """A collected call's label in ``log`` and ``browse``: its tool and call
    id, what happened, and its boundary seq as a checkpoint's label ends
    (``[calls 3]``: ``rewind SESSION --seq 3 --conversation-only``)."""
    return (f"{b.tool_name or '?'} {b.tool_use_id or '(no call id)'}: checkpoint collected "
            f"by gc, files not restorable [calls {b.seq}]")


def timeline_order(c: Checkpoint) -> tuple[Any, ...]:
    """Oldest first: by time, ties broken by attempt and seq (stable)."""
    return (c.created_at_ms, c.run_id, c.node_id, c.iteration, c.attempt, c.seq)


def base_of(target: Checkpoint, rows: Sequence[Checkpoint]) -> Checkpoint | None:
    """The checkpoint ``target`` is compared with (see the module's docstring);
    ``rows``: the checkpoints of its worktree, in any order."""
    return bases(rows).get(_id(target))


def bases(rows: Sequence[Checkpoint]) -> dict[tuple[Any, ...], Checkpoint | None]:
    """The base of every checkpoint in ``rows`` (one worktree's), by
    ``(attempt key, seq)``, in one pass over them."""
    found: dict[tuple[Any, ...], Checkpoint | None] = {}
    by_attempt: dict[AttemptKey, list[Checkpoint]] = defaultdict(list)
    for r in rows:
        by_attempt[r.key].append(r)
    for group in by_attempt.values():
        group.sort(key=lambda r: r.seq)
        found.update((_id(cur), prev) for prev, cur in pairwise(group))
    # An attempt's first: the newest earlier checkpoint of another attempt,
    # which is the newest of all unless that one is of the same attempt.
    last: Checkpoint | None = None
    last_other: Checkpoint | None = None  # the newest whose attempt is not last's
    for r in sorted(rows, key=timeline_order):
        if _id(r) not in found:
            found[_id(r)] = last if last is None or last.key != r.key else last_other
        if last is not None and last.key != r.key:
            last_other = last
        last = r
    return found


def _id(c: Checkpoint) -> tuple[Any, ...]:
    return (c.key, c.seq)


@dataclass(frozen=True)
class Shown:
    """One checkpoint, its base, and what it changed against it
    (``show --json`` prints it as ``output.ShownOut``)."""

    checkpoint: Checkpoint
    base: Checkpoint | None
    changes: Changes | None


def describe(store: Store, checkpoint: Checkpoint, *, paths: Sequence[str] = (),
             env: Mapping[str, str] = os.environ) -> Shown:
    """``checkpoint`` and what it changed against its base."""
    base = base_of(checkpoint, store.worktree_checkpoints(checkpoint.worktree))
    if base is None:
        return Shown(checkpoint, None, None)
    repo = open_checkpoints(checkpoint.worktree, env)
    return Shown(checkpoint, base, in_repository(repo, base, checkpoint, paths))


@dataclass(frozen=True)
class Entry:
    """One line of a timeline: a checkpoint (with what it changed, None when
    it has no base or its commits cannot be read), a gap, or a tool call
    whose checkpoint gc collected (``call``: its boundary; ``log --json``
    prints each as ``output.entry_out`` makes it)."""

    time_ms: int
    checkpoint: Checkpoint | None = None
    base: Checkpoint | None = None
    totals: Sizes | None = None
    gap: Gap | None = None
    call: Boundary | None = None


def timeline(store: Store, worktree: Path, *, limit: int | None = None,
             env: Mapping[str, str] = os.environ, progress: Progress | None = None,
             collected: bool = False) -> list[Entry]:
    """The checkpoints and gaps of ``worktree``, newest first (at most
    ``limit`` entries); ``progress`` hears of each checkpoint compared.
    ``collected``: with the collected calls of the attempts that ran there."""
    rows = store.worktree_checkpoints(str(worktree))
    calls = (collected_boundaries(store, worktree=str(worktree), limit=limit)
             if collected else [])
    entries = _newest_first(rows, store.worktree_gaps(str(worktree)), limit, calls)
    return _with_all_totals(store, entries, env, progress)


def run_timeline(store: Store, run_id: str, *, limit: int | None = None,
                 env: Mapping[str, str] = os.environ, progress: Progress | None = None,
                 collected: bool = False) -> list[Entry]:
    """The checkpoints and gaps of one run (session), newest first, each
    checkpoint against its base in its worktree (which may be another run's
    checkpoint: the rule is the same as ``timeline``'s).  ``collected``:
    with the run's collected calls."""
    calls = collected_boundaries(store, run_id=run_id, limit=limit) if collected else []
    entries = _newest_first(store.checkpoints(run_id), store.gaps(run_id), limit, calls)
    return _with_all_totals(store, entries, env, progress)


def _newest_first(rows: Sequence[Checkpoint], gaps: Sequence[Gap], limit: int | None,
                  calls: Sequence[Boundary] = ()) -> list[Entry]:
    entries = [Entry(g.ts_ms, gap=g) for g in gaps]
    entries += [Entry(c.created_at_ms, checkpoint=c) for c in rows]
    entries += [Entry(b.created_at_ms, call=b) for b in calls]
    # Gaps before checkpoints of the same millisecond: the gap was filed first.
    entries.sort(key=_newest_first_key, reverse=True)
    return entries[:limit] if limit is not None else entries


def _newest_first_key(e: Entry) -> tuple[Any, ...]:
    if e.checkpoint is not None:
        return (e.time_ms, 1, timeline_order(e.checkpoint))
    if e.call is not None:
        # Among its attempt's checkpoints of the same millisecond, right
        # after the one it named (recorded once that capture answered).
        b = e.call
        return (e.time_ms, 1, (b.created_at_ms, b.run_id, b.node_id, b.iteration, b.attempt,
                               b.checkpoint_seq, b.seq))
    return (e.time_ms, 0, ())


def _with_all_totals(store: Store, entries: Sequence[Entry], env: Mapping[str, str],
                     progress: Progress | None) -> list[Entry]:
    """``entries`` with each checkpoint's base and totals; one repository
    and one pass over the rows per worktree."""
    found: dict[tuple[Any, ...], Checkpoint | None] = {}
    repos: dict[str, pygit2.Repository | None] = {}
    for wt in sorted({e.checkpoint.worktree for e in entries if e.checkpoint is not None}):
        found.update(bases(store.worktree_checkpoints(wt)))
        repos[wt] = _open(Path(wt), env)
    out, total, done = [], sum(e.checkpoint is not None for e in entries), 0
    for e in entries:
        if e.checkpoint is not None:
            e = _with_totals(e, found, repos[e.checkpoint.worktree])
            done += 1
            if progress is not None:
                progress(done, total)
        out.append(e)
    return out


def _open(worktree: Path, env: Mapping[str, str]) -> pygit2.Repository | None:
    try:
        return open_checkpoints(worktree, env)
    except DurabilityError:
        return None  # the worktree is gone: the timeline still lists its records


def _with_totals(entry: Entry, found: Mapping[tuple[Any, ...], Checkpoint | None],
                 repo: pygit2.Repository | None) -> Entry:
    c = entry.checkpoint
    if c is None:
        return entry
    base = found.get(_id(c))
    if base is None or repo is None:
        return Entry(entry.time_ms, c, base)
    try:
        totals = sizes_between(repo.odb, commit_tree(repo, base.commit_id, f"seq {base.seq}"),
                               commit_tree(repo, c.commit_id, f"seq {c.seq}"))
    except NotFound:
        totals = None  # a commit no longer in the repository: shown as unknown
    return Entry(entry.time_ms, c, base, totals)
