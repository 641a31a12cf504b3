"""The MCP tools: one small function each, over the same library functions
the CLI's commands call (never the CLI itself).

A tool is a ``Tool``: a name, what it does, its typed input and output
(``models``), and a function ``(Here, input) -> output`` that runs in a
worker thread (the library blocks: SQLite, jj, git).  Adding a command's twin
is one function and one line in ``TOOLS``.  A failure is raised as the
library raises it (a ``DurabilityError`` or an ``EngineError`` with its
stable code); ``server.py`` turns it into the tool's error answer.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from durability.config import Settings
from durability.ground import ids
from durability.ground.errors import InvalidInput
from durability.mcp import models as m
from durability.output.records import entry_out, files_out
from durability.store import AttemptKey, Checkpoint, Gap, NotFound, Store
from durability.store.models import Attempt, Session

if TYPE_CHECKING:
    from durability.inspect.diff import Changes
    from durability.runs.detach import Worker
    from durability.runs.fence import Claim, Owner
    from durability.runs.run_rows import RunRow, Runs
    from durability.runs.runner import RunOutcome
    from durability.store.events import Event

__all__ = ["TOOLS", "Here", "Tool", "tools"]


@dataclass(frozen=True)
class Here:
    """What every call shares: the settings resolved once at start, and the
    folder the server was started in (the default worktree).

    The agent is the client, so it reaches the worktree of that folder only
    (``check``, ``check_run``): a ``worktree`` or a run id of another project is refused,
    or it could restore that project's files or read them through show and
    diff.  ``any_worktree`` (``durability mcp --any-worktree``, a person's
    choice) lifts that."""

    settings: Settings
    cwd: Path
    #: Whether ``approve`` is served (``durability mcp --allow-approve``).
    allow_approve: bool = False
    #: Whether every worktree the state knows is served, not only the cwd's.
    any_worktree: bool = False

    def path(self, given: str | None) -> Path:
        """A path from the agent: absolute, or relative to the server's folder."""
        if given is None:
            return self.cwd
        return Path(os.path.normpath(self.cwd / given))

    def worktree(self, given: str | None) -> Path:
        """The root of the worktree holding ``given``, which must be served."""
        from durability.backends import resolve_worktree

        root = resolve_worktree(self.path(given))
        if given is not None:
            self.check(root)
        return root

    def own(self) -> Path:
        """The root of the worktree the server was started in."""
        from durability.backends import resolve_worktree

        return resolve_worktree(self.cwd)

    def check(self, worktree: str | Path) -> None:
        """Refuse ``worktree`` unless this server serves it."""
        if self.any_worktree:
            return
        own = self.own()
        if Path(worktree) != own:
            raise InvalidInput(f"{ids.printable(str(worktree))} is not the worktree this "
                               f"server serves ({ids.printable(str(own))}); a person can "
                               "start it with --any-worktree")

    def check_run(self, store: Store, run_id: str) -> None:
        """Refuse a run that has not touched the served worktree."""
        if self.any_worktree:
            return
        own = self.own()
        if not any(s.run_id == run_id for s in store.sessions(worktree=str(own))):
            raise InvalidInput(f"run {run_id!r} has not touched the worktree this server "
                               f"serves ({ids.printable(str(own))})")

    def workflow(self, given: str) -> Path:
        """A workflow file from the agent: a file inside the served worktree
        (its real path: no link out of it), since running it runs its code."""
        path = self.path(given)
        real = path.resolve()
        if not real.is_file():
            raise InvalidInput(f"workflow file {ids.printable(str(path))} does not exist or is "
                               "not a file")
        if not self.any_worktree:
            own = self.own().resolve()
            if not real.is_relative_to(own):
                raise InvalidInput(f"workflow file {ids.printable(str(path))} is not inside "
                                   f"the worktree this server serves ({ids.printable(str(own))})"
                                   "; a person can start it with --any-worktree")
        return path

    def check_engine_run(self, row: RunRow) -> None:
        """Refuse an engine run of another project: one that works in another
        worktree (or, with none, whose workflow is not in the served one)."""
        if self.any_worktree:
            return
        own = self.own()
        where = row.worktree if row.worktree is not None else row.workflow_path
        inside = where is not None and (where == str(own) or _inside(where, str(own)))
        if not inside:
            raise InvalidInput(f"run {row.run_id!r} does not work in the worktree this "
                               f"server serves ({ids.printable(str(own))})")

    @contextmanager
    def store(self) -> Iterator[Store]:
        # One connection per call, opened in the worker thread that uses it.
        with Store(self.settings.database) as store:
            yield store


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input: type[BaseModel]
    output: type[BaseModel]
    run: Callable[[Here, Any], BaseModel]
    #: Changes nothing (MCP's ``readOnlyHint``).
    read_only: bool = True


# -- shared steps --------------------------------------------------------------


def _run_id(here: Here, store: Store, run_id: str | None, worktree: str | None) -> str:
    """The run named, which must have records, or the newest session of the
    worktree (as ``--latest`` does)."""
    if run_id is not None:
        if not store.has_records(run_id):
            raise NotFound(f"no run or session {run_id!r}: the sessions tool lists them")
        here.check_run(store, run_id)
        return run_id
    root = str(here.worktree(worktree))
    found = store.sessions(worktree=root)
    if not found:
        raise NotFound(f"no session has touched {root} yet")
    return found[0].run_id


def _only_node(store: Store, run_id: str) -> str:
    nodes = sorted({c.node_id for c in store.checkpoints(run_id)})
    if len(nodes) == 1:
        return nodes[0]
    if not nodes:
        raise NotFound(f"run {run_id!r} has no checkpoints")
    raise InvalidInput(f"run {run_id!r} has nodes {', '.join(nodes)}: pick one with node_id")


def _pick(here: Here, store: Store, args: m.PickIn) -> Checkpoint:
    from durability.restore.apply import find_checkpoint

    run_id = _run_id(here, store, args.run_id, args.worktree)
    found = find_checkpoint(store, run_id=run_id,
                            node_id=args.node_id or _only_node(store, run_id),
                            iteration=args.iteration, attempt=args.attempt, seq=args.seq)
    # A run may span worktrees (an engine run's nodes): the checkpoint itself
    # must be of the served one.
    here.check(found.worktree)
    return found


def _side(c: Checkpoint | None) -> m.SideOut | None:
    return m.SideOut.of(c)


def _checkpoint(c: Checkpoint) -> m.CheckpointOut:
    return m.CheckpointOut.from_record(c)


def _ingest(here: Here, store: Store) -> int:
    """Gaps still in the spool belong in the answer too; the torn lines skipped."""
    from durability.gaps.ingest import ingest_spool

    return ingest_spool(store, here.settings.spool_dirs).torn


def _scope(here: Here) -> str | None:
    """The worktree whose records the answers keep (None: every one's, with
    ``--any-worktree``).  A session may have touched several worktrees (a
    harness session that changed folder): through this server it shows only
    what it recorded in the served one, never another project's paths,
    commits or labels."""
    return None if here.any_worktree else str(here.own())


def _records_in(root: str, checkpoints: list[Checkpoint], gaps: list[Gap]
                ) -> tuple[list[Checkpoint], list[Gap]]:
    """A session's records of worktree ``root``: its checkpoints there, and
    its gaps there (a gap that names no worktree only when the session
    recorded nothing elsewhere: it may be of the other one; a gap of a folder
    inside ``root`` is ``root``'s)."""
    elsewhere = (any(c.worktree != root for c in checkpoints)
                 or any(g.worktree is not None and not _inside(g.worktree, root)
                        for g in gaps))
    return ([c for c in checkpoints if c.worktree == root],
            [g for g in gaps if (_inside(g.worktree, root) if g.worktree is not None
                                 else not elsewhere)])


def _inside(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or under it (a gap names the folder a
    capture was asked for, which may be one inside the worktree)."""
    return path == root or path.startswith(root.rstrip("/") + "/")


def _session_in(store: Store, s: Session, root: str, checkpoints: int, gaps: int) -> Session:
    """``s`` as it was in ``root`` (``checkpoints`` and ``gaps``: how many of
    its records name ``root``); the store's row when it is all there."""
    if s.worktree == root and (s.checkpoints, s.gaps) == (checkpoints, gaps):
        return s
    cps, kept = _records_in(root, store.checkpoints(s.run_id), store.gaps(s.run_id))
    times = [c.created_at_ms for c in cps] + [g.ts_ms for g in kept]
    if not times:
        return dataclasses.replace(s, worktree=root, checkpoints=0, gaps=0, sources="",
                                   harnesses="")
    return dataclasses.replace(
        s, worktree=root, first_ms=min(times), last_ms=max(times), checkpoints=len(cps),
        gaps=len(kept), sources=",".join(sorted({c.source for c in cps})),
        harnesses=",".join(sorted({c.harness for c in cps if c.harness})))


# -- the tools -----------------------------------------------------------------


def sessions(here: Here, args: m.SessionsIn) -> m.SessionsOut:
    # Every session's only with --any-worktree: the list names other
    # projects' folders.
    everywhere = args.worktree is None and here.any_worktree
    root = None if everywhere else str(here.worktree(args.worktree))
    with here.store() as store:
        rows = store.sessions(worktree=root)
        if root is not None:  # each listed with what it did here only
            cps = Counter(c.run_id for c in store.worktree_checkpoints(root))
            gps = Counter(g.run_id for g in store.worktree_gaps(root))
            rows = [_session_in(store, r, root, cps[r.run_id], gps[r.run_id]) for r in rows]
            rows.sort(key=lambda r: (-r.last_ms, r.run_id))
    kept = rows[:args.limit] if args.limit is not None else rows  # newest first
    return m.SessionsOut(sessions=[m.SessionOut.from_record(s) for s in kept], total=len(rows))


def snapshots(here: Here, args: m.SnapshotsIn) -> m.CheckpointsOut:
    with here.store() as store:
        run_id = _run_id(here, store, args.run_id, args.worktree)
        rows = store.checkpoints(run_id, args.node_id)
    root = _scope(here)
    if root is not None:
        rows = [c for c in rows if c.worktree == root]
    kept = rows[-args.limit:] if args.limit is not None else rows
    return m.CheckpointsOut(run_id=run_id, checkpoints=[_checkpoint(c) for c in kept],
                            total=len(rows))


def show(here: Here, args: m.PickIn) -> m.ShowOut:
    from durability.inspect.timeline import describe

    with here.store() as store:
        shown = describe(store, _pick(here, store, args))
    files, totals = files_out(shown.changes)
    return m.ShowOut(checkpoint=_checkpoint(shown.checkpoint), base=_side(shown.base),
                     files=files, totals=totals)


def diff(here: Here, args: m.DiffIn) -> m.DiffOut:
    from durability.backends.selection import normalize
    from durability.inspect import compare
    from durability.inspect.timeline import describe

    if args.to_seq is not None and args.to_worktree:
        raise InvalidInput("give to_seq or to_worktree, not both")
    with here.store() as store:
        a = _pick(here, store, args)
        paths = [p for p in normalize(args.paths, Path(a.worktree)) if p] if args.paths else []
        old: m.SideOut | None = _side(a)
        new: m.SideOut | str | None
        changes: Changes | None
        if args.to_worktree:
            changes, new = compare.with_worktree(a, paths=paths), "worktree"
        elif args.to_seq is not None:
            b = store.checkpoint(a.key, args.to_seq)
            here.check(b.worktree)
            changes, new = compare.checkpoints(a, b, paths=paths), _side(b)
        else:
            shown = describe(store, a, paths=paths)
            changes, old, new = shown.changes, _side(shown.base), _side(a)
    patch, cut = _patch(changes, args) if args.patch and changes is not None else (None, False)
    files, totals = files_out(changes)
    return m.DiffOut.model_validate({"from": old, "to": new, "files": files, "totals": totals,
                                     "patch": patch, "patch_truncated": cut})


def _patch(changes: Changes, args: m.DiffIn) -> tuple[str, bool]:
    """The unified diff, cut at ``max_patch_bytes``: a file's bytes need not
    be UTF-8, so undecodable ones are escaped."""
    out, size = [], 0
    for data in changes.patches():
        if size + len(data) > args.max_patch_bytes:
            out.append(data[:args.max_patch_bytes - size])
            return b"".join(out).decode("utf-8", "backslashreplace"), True
        out.append(data)
        size += len(data)
    return b"".join(out).decode("utf-8", "backslashreplace"), False


def log(here: Here, args: m.LogIn) -> m.LogOut:
    from durability.inspect.timeline import timeline

    root = here.worktree(args.worktree)
    with here.store() as store:
        _ingest(here, store)
        entries = timeline(store, root, limit=args.limit)
    return m.LogOut(worktree=str(root), entries=[entry_out(e).dump() for e in entries])


def gaps(here: Here, args: m.GapsIn) -> m.GapsOut:
    with here.store() as store:
        torn = _ingest(here, store)
        run_id = _run_id(here, store, args.run_id, args.worktree)
        rows = store.gaps(run_id)
        root = _scope(here)
        if root is not None:
            rows = _records_in(root, store.checkpoints(run_id), rows)[1]
    kept = _newest_gaps(rows, args.limit)
    return m.GapsOut(run_id=run_id, gaps=[m.GapOut.from_record(g) for g in kept],
                     total=len(rows), torn_spool_lines=torn)


def _newest_gaps(rows: list[Gap], limit: int | None) -> list[Gap]:
    """The newest ``limit`` gaps, in the store's order."""
    if limit is None or len(rows) <= limit:
        return rows
    newest = {id(g) for g in sorted(rows, key=lambda g: g.ts_ms)[-limit:]}
    return [g for g in rows if id(g) in newest]


def attempts(here: Here, args: m.RunIdIn) -> m.AttemptsOut:
    with here.store() as store:
        run_id = _run_id(here, store, args.run_id, args.worktree)
        rows = store.attempts(run_id)
        root = _scope(here)
        if root is not None:
            rows = _attempts_in(root, rows, store.checkpoints(run_id))
    return m.AttemptsOut(run_id=run_id, attempts=[m.AttemptOut.from_record(a) for a in rows])


def _attempts_in(root: str, rows: list[Attempt], checkpoints: list[Checkpoint]
                 ) -> list[Attempt]:
    """The attempts as they were in ``root``: one whose newest checkpoint is
    elsewhere shows its newest one here as its pointer; one with nothing
    here is left out (one with no checkpoint and no worktree only when the
    run recorded nothing elsewhere)."""
    newest: dict[AttemptKey, Checkpoint] = {}
    for c in checkpoints:  # by attempt, then seq: the last one wins
        if c.worktree == root:
            newest[c.key] = c
    elsewhere = (any(c.worktree != root for c in checkpoints)
                 or any(a.worktree not in (None, root) for a in rows))
    kept = []
    for a in rows:
        if a.worktree == root:
            kept.append(a)
        elif a.key in newest:
            kept.append(dataclasses.replace(a, worktree=root,
                                            jj_pointer=newest[a.key].commit_id))
        elif a.worktree is None and not elsewhere:
            kept.append(a)
    return kept


def snapshot_now(here: Here, args: m.SnapshotIn) -> m.SnapshotOut:
    from durability.capture.snapshot import snapshot_now as capture

    root = here.worktree(args.worktree)
    with here.store() as store:
        if args.run_id is not None and store.has_records(args.run_id):
            here.check_run(store, args.run_id)  # not another project's session
        run_id = args.run_id or _newest(store, root)
        node_id = args.node_id or _default_node(store, run_id)
    key = AttemptKey(run_id, node_id, args.iteration, args.attempt)
    done = capture(here.settings, key=key, path=root, label=args.label,
                   request_id=str(uuid.uuid4()), source="manual")
    return m.SnapshotOut(run_id=run_id, node_id=node_id, iteration=args.iteration,
                         attempt=args.attempt, seq=done.seq, commit_id=done.commit_id,
                         deduped=done.deduped,
                         skipped=[{"path": s.path, "reason": s.reason} for s in done.skipped])


def _newest(store: Store, root: Path) -> str:
    found = store.sessions(worktree=str(root))
    if not found:
        raise InvalidInput(f"no session has touched {root} yet: name a run_id to record under")
    return found[0].run_id


def _default_node(store: Store, run_id: str) -> str:
    # A hook session's node is `session` (DURABILITY_NODE_ID aside).
    nodes = sorted({c.node_id for c in store.checkpoints(run_id)})
    return nodes[0] if len(nodes) == 1 else "session"


def restore(here: Here, args: m.RestoreIn) -> m.RestoreOut:
    from durability.restore.apply import preview
    from durability.restore.apply import restore as do_restore

    with here.store() as store:
        target = _pick(here, store, args)
    which: dict[str, Any] = {
        "run_id": target.run_id, "node_id": target.node_id, "iteration": target.iteration,
        "attempt": target.attempt, "seq": target.seq, "paths": list(args.paths) or None}
    if args.dry_run:
        return m.RestoreOut.of_preview(preview(here.settings, **which))
    # Every restore takes its pre-restore checkpoint first (contract 7): the undo.
    done = do_restore(here.settings, **which)
    r = done.undo_key  # the attempt the pre-restore checkpoint went on
    undo = {"run_id": r.run_id, "node_id": r.node_id, "iteration": r.iteration,
            "attempt": r.attempt, "seq": done.pre_restore_seq}
    command = (f"durability restore {ids.printable(r.run_id)} --node {ids.printable(r.node_id)}"
               f" --iteration {r.iteration} --attempt {r.attempt} --seq {done.pre_restore_seq}")
    return m.RestoreOut.of_restored(done, m.UndoOut(arguments=undo, command=command))


def rewind(here: Here, args: m.RewindIn) -> m.RewoundOut:
    """The session back to one of its tool calls (``durability rewind``),
    in the served worktree only."""
    from durability.rewind.apply import rewind as do_rewind
    from durability.store.boundaries import find_boundary

    with here.store() as store:
        run_id = _run_id(here, store, args.run_id, args.worktree)
        if (args.seq is None) != (args.call is None):
            here.check(find_boundary(store, run_id, seq=args.seq, call=args.call).worktree)
        done = do_rewind(here.settings, store, run_id, seq=args.seq, call=args.call,
                         code=not args.conversation_only, conversation=not args.code_only,
                         dry_run=args.dry_run)
    return m.RewoundOut.of(done)


def runs(here: Here, args: m.NoIn) -> m.RunsOut:
    from durability.runs.run_rows import Runs

    with Runs(here.settings.database) as r:
        return m.RunsOut(runs=[row.to_dict() for row in r.list_runs()])


def run_status(here: Here, args: m.RunStatusIn) -> m.RunStatusOut:
    from durability.runs.run_rows import Runs
    from durability.runs.status import run_status as status

    with Runs(here.settings.database) as r:
        return m.RunStatusOut.model_validate(status(r, args.run_id))


def service_status(here: Here, args: m.NoIn) -> m.ServiceStatusOut:
    from durability.service import daemon

    answer = daemon.status(here.settings)
    return m.ServiceStatusOut.model_validate(
        {"running": answer is not None, "socket": str(here.settings.socket_path),
         **(answer or {})})


def logs(here: Here, args: m.LogsIn) -> m.LogsOut:
    from durability.runs.run_rows import Runs

    with Runs(here.settings.database) as r:
        if args.run_id is None:
            with here.store() as store:
                run_id = _run_id(here, store, None, args.worktree)
        else:
            run_id = args.run_id
            if not _engine_run(r, run_id):
                # A hook session (its runs row has no state): bound to the served
                # worktree as `snapshots` is, for it names that worktree's commits.
                if not r.events(run_id, limit=1):
                    raise NotFound(f"no run {run_id!r}: the sessions and runs tools list them")
                with here.store() as store:
                    here.check_run(store, run_id)
        root = None if _engine_run(r, run_id) else _scope(here)
        if root is None:
            events, total = r.newest_events(run_id, args.limit)
        else:  # a hook session: its events of the served worktree only
            with here.store() as store:
                cps = store.checkpoints(run_id)
            every, _ = r.newest_events(run_id, _ALL_EVENTS)
            shown = _events_in(root, every, cps)
            events, total = shown[-args.limit:], len(shown)
    return m.LogsOut(run_id=run_id, events=[m.EventOut.from_record(e) for e in events],
                     total=total)


#: Every event of a hook session, to filter (one per checkpoint or gap).
_ALL_EVENTS = 10**9


def _events_in(root: str, events: list[Event], checkpoints: list[Checkpoint]) -> list[Event]:
    """The events of a hook session that are of worktree ``root``: a
    checkpoint's only when that checkpoint is there, and none that names
    another worktree or one of its commits."""
    Key = tuple[str | None, int | None, int | None, int | None]
    place: dict[Key, str] = {(c.node_id, c.iteration, c.attempt, c.seq): c.worktree
                             for c in checkpoints}
    foreign = {c.worktree for c in checkpoints if c.worktree != root}
    foreign |= {c.commit_id for c in checkpoints if c.worktree != root}
    kept = []
    for e in events:
        at = place.get((e.node_id, e.iteration, e.attempt, e.seq))
        if e.kind == "checkpoint" and at != root:
            continue
        named = (e.detail or {}).get("worktree")
        if isinstance(named, str) and not _inside(named, root):
            continue  # an event of another worktree (watch-ended)
        if any(f in text for text in _strings(e.detail) for f in foreign):
            continue
        kept.append(e)
    return kept


def _strings(value: object) -> Iterator[str]:
    """Every string of an event's detail, keys included, as it is (not as
    JSON escapes it: a path with non-ASCII characters is matched too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _engine_run(r: Runs, run_id: str) -> bool:
    """Whether the engine started ``run_id`` (served as ``run_status`` is)."""
    try:
        r.get_run(run_id)
    except NotFound:
        return False
    return True


def gc_preview(here: Here, args: m.GcPreviewIn) -> m.GcPreviewOut:
    from durability.retention.gc import extra_keepers, run_gc
    from durability.retention.policy import load_policy
    from durability.store import now_ms

    root = str(here.worktree(args.worktree))
    overrides = {k: v for k in ("keep_all_days", "hourly_days", "daily_days",
                                "pre_restore_days") if (v := getattr(args, k)) is not None}
    policy = load_policy().with_values(overrides)
    with here.store() as store:
        # Always a dry run: the agent may see what gc would drop, never drop it.
        report = run_gc(here.settings, store, policy, now_ms=now_ms(), dry_run=True,
                        keepers=extra_keepers(here.settings), measure=False,
                        lock_timeout_s=_GC_LOCK_TIMEOUT_S, only=[root])
    data = report.to_dict()
    expired = sorted((c for r in report.repositories for c in r.expired),
                     key=lambda c: (c.created_at_ms, c.seq))
    return m.GcPreviewOut(worktree=root, policy=data["policy"], checkpoints=data["checkpoints"],
                          repositories=data["repositories"], skipped=data["skipped"],
                          would_drop=[_checkpoint(c) for c in expired[-args.limit:]],
                          would_drop_total=len(expired))


#: A preview waits this long for a capture's worktree lock, then says it skipped.
_GC_LOCK_TIMEOUT_S = 30.0


def remotes(here: Here, args: m.RemotesIn) -> m.RemotesOut:
    from durability.ground.redact import redact
    from durability.store.remote_rows import Remotes

    root = str(here.worktree(args.worktree))
    named = Remotes(here.settings.database)
    with here.store() as store:
        rows = store.worktree_checkpoints(root)
    states = named.states(rows)
    counts: dict[str, Counter[str]] = {}
    for per_remote in states.values():
        for name, state in per_remote.items():
            counts.setdefault(name, Counter())[state] += 1
    return m.RemotesOut(worktree=root, checkpoints=len(rows), remotes=[
        m.RemoteOut.from_record(r, url=redact(r.url),
                                pushed=counts.get(r.name, Counter())["pushed"],
                                pending=counts.get(r.name, Counter())["pending"],
                                failed=counts.get(r.name, Counter())["failed"])
        for r in named.all(root)])


# -- the engine's runs: run, resume, pause, cancel, fork -------------------------
# A run, a resume or a fork is recorded and claimed here, with the engine's
# checks (so a refusal is this call's answer, with the command's code), then
# handed to a detached worker (durability.runs.detach; decision 0053): the
# call answers at once, the worker drives the run for as long as it takes,
# and it outlives the server.  run_status and logs follow it.


def _owner() -> Owner:
    """The claimant while the worker starts: this server's process."""
    from durability.runs.fence import Owner, host_id

    return Owner.this_process(f"mcp:{os.getpid()}@{host_id()}:{uuid.uuid4().hex[:8]}")


def _hand_over(here: Here, r: Runs, claim: Claim, accept: bool = False) -> Worker:
    from durability.runs.detach import hand_over

    # The worker resolves exactly these settings (config.Settings.to_env).
    env = {**os.environ, **here.settings.to_env()}
    return hand_over(r, claim, runs_dir=here.settings.state_dir / "runs", env=env,
                     accept_workflow_change=accept)


def _outcome(outcome: RunOutcome) -> m.RunOutcomeOut:
    return m.RunOutcomeOut(run_id=outcome.run_id, state=outcome.state,
                           existing=outcome.existing, error=outcome.error,
                           waiting_on=outcome.waiting_on, wake_at_ms=outcome.wake_at_ms,
                           next=_follow(outcome.run_id))


def _started(worker: Worker) -> m.RunOutcomeOut:
    return m.RunOutcomeOut(run_id=worker.run_id, state="running",
                           worker=m.WorkerOut.from_record(worker), next=_follow(worker.run_id))


def _follow(run_id: str) -> str:
    return (f"run_status (run_id {run_id!r}) for its tasks, logs for its events; "
            f"pause or cancel to stop it")


def _engine_row(here: Here, r: Runs, run_id: str) -> RunRow:
    row = r.get_run(run_id)  # NotFound for a hook session or an unknown id
    here.check_engine_run(row)
    return row


def run(here: Here, args: m.RunIn) -> m.RunOutcomeOut:
    from durability.runs.budget import Limits
    from durability.runs.execute import create_run
    from durability.runs.run_rows import Runs
    from durability.runs.runner import RunOutcome

    workflow = here.workflow(args.workflow)
    worktree = str(here.worktree(args.worktree)) if args.worktree is not None else _own_or_none(
        here)
    with Runs(here.settings.database) as r:
        made = create_run(r, workflow, run_id=args.run_id, worktree=worktree,
                          limits=Limits(args.max_turns, args.max_tokens, args.max_cost),
                          owner=_owner())
        if isinstance(made, RunOutcome):  # already started: said, nothing done
            here.check_engine_run(r.get_run(made.run_id))
            return _outcome(made)
        return _started(_hand_over(here, r, made[1]))


def _own_or_none(here: Here) -> str | None:
    """The served worktree, as `durability run` defaults to the one it is
    started in; None when the server's folder is in none."""
    from durability.ground.errors import CaptureError

    try:
        return str(here.own())
    except CaptureError:
        return None


def resume(here: Here, args: m.ResumeIn) -> m.RunOutcomeOut:
    from durability.runs.execute import resume_claim
    from durability.runs.run_rows import Runs
    from durability.store import now_ms

    asked = now_ms()  # a claim another process takes after this is a lost race
    with Runs(here.settings.database) as r:
        _engine_row(here, r, args.run_id)
        claim = resume_claim(r, args.run_id, owner=_owner(), now=now_ms(),
                             stale_after_ms=args.stale_after_ms, force=args.force,
                             accept_workflow_change=args.accept_workflow_change,
                             since_ms=asked)
        return _started(_hand_over(here, r, claim, args.accept_workflow_change))


def _request(here: Here, run_id: str, kind: str) -> m.RequestOut:
    from durability.runs.run_rows import Runs

    with Runs(here.settings.database) as r:
        _engine_row(here, r, run_id)
        # As the commands: ten missed beats (one a second) means the owner is gone.
        done = r.request(run_id, kind, live_within_ms=10_000)
    return m.RequestOut.model_validate({"run_id": run_id, "request": kind, "outcome": done})


def pause(here: Here, args: m.RunStatusIn) -> m.RequestOut:
    return _request(here, args.run_id, "pause")


def cancel(here: Here, args: m.RunStatusIn) -> m.RequestOut:
    return _request(here, args.run_id, "cancel")


def fork(here: Here, args: m.ForkIn) -> m.RunOutcomeOut:
    from durability.runs.execute import EngineConfig
    from durability.runs.fork import create_fork
    from durability.runs.run_rows import Runs

    with Runs(here.settings.database) as r:
        _engine_row(here, r, args.run_id)
        _, claim = create_fork(r, args.run_id, node_id=args.node_id, config=EngineConfig(),
                               restore=_fork_restorer(here), iteration=args.iteration,
                               seq=args.seq, new_id=args.new_run_id, owner=_owner())
        return _started(_hand_over(here, r, claim))


def _fork_restorer(here: Here) -> Callable[[Checkpoint, str], str]:
    """The fork's restore of the parent's worktree (as `durability fork`'s)."""
    def restore_to(point: Checkpoint, worktree: str) -> str:
        from durability.restore.apply import restore as do_restore

        here.check(worktree)
        done = do_restore(here.settings, run_id=point.run_id, node_id=point.node_id,
                          iteration=point.iteration, attempt=point.attempt, seq=point.seq,
                          worktree=worktree)
        return (f"restored {done.worktree} to {point.node_id} iteration {point.iteration} "
                f"attempt {point.attempt} seq {point.seq} (undo: seq {done.pre_restore_seq})")
    return restore_to


def agent_run(here: Here, args: m.AgentRunIn) -> m.RunOutcomeOut:
    """``durability agent run``'s twin: the one-task run's workflow file is
    written beside the state (as the command writes it), the run recorded and
    claimed as ``run`` does, then handed to a worker, so an agent's hours-long
    session runs in the worker, never in the server."""
    from durability.runs.agent import agents_folder, spec_json, write_workflow_file
    from durability.runs.budget import Limits
    from durability.runs.execute import create_run, new_run_id
    from durability.runs.run_rows import Runs
    from durability.runs.runner import RunOutcome
    from durability.runs.workflow import validate_id

    if len(set(args.harness)) != len(args.harness):
        raise InvalidInput("harness: a harness named twice")
    worktree = str(here.worktree(args.worktree)) if args.worktree is not None else str(
        here.own())
    run_id = validate_id(args.run_id or new_run_id(), "run id")
    folder = agents_folder({"DURABILITY_HOME": str(here.settings.state_dir)})
    with Runs(here.settings.database) as r:
        try:
            here.check_engine_run(r.get_run(run_id))
            path = folder / f"{run_id}.py"  # an existing run: its file as it was
        except NotFound:
            spec = spec_json(prompt=args.prompt, harness=args.harness, model=args.model,
                             max_turns=args.max_turns, output_schema=args.output_schema)
            path = write_workflow_file(folder, run_id, spec)
        made = create_run(r, path, run_id=run_id, worktree=worktree,
                          limits=Limits(args.max_turns, args.max_tokens, args.max_cost),
                          owner=_owner())
        if isinstance(made, RunOutcome):
            return _outcome(made)
        return _started(_hand_over(here, r, made[1]))


def approve(here: Here, args: m.ApproveIn) -> m.DecisionOut:
    return _decide(here, args.run_id, args.node_id, "approved", None)


def deny(here: Here, args: m.DenyIn) -> m.DecisionOut:
    return _decide(here, args.run_id, args.node_id, "denied", args.reason)


def _decide(here: Here, run_id: str, node_id: str, decision: str,
            reason: str | None) -> m.DecisionOut:
    from durability.runs.run_rows import Runs

    with Runs(here.settings.database) as r:
        _engine_row(here, r, run_id)
        r.decide(run_id, node_id, decision, reason)
    return m.DecisionOut(run_id=run_id, node_id=node_id,
                         decision="approved" if decision == "approved" else "denied",
                         next=f"durability resume {run_id}")


_READ = "Changes nothing."
TOOLS = [
    Tool("sessions", "List every run or hook session with checkpoints or gaps, newest first. "
         + _READ, m.SessionsIn, m.SessionsOut, sessions),
    Tool("snapshots", "List a run's checkpoints (by attempt, then seq). " + _READ,
         m.SnapshotsIn, m.CheckpointsOut, snapshots),
    Tool("show", "One checkpoint and the files it changed against the checkpoint before it. "
         + _READ, m.PickIn, m.ShowOut, show),
    Tool("diff", "The files changed between two checkpoints, or between a checkpoint and the "
         "worktree now; with patch=true also the unified diff. " + _READ,
         m.DiffIn, m.DiffOut, diff),
    Tool("log", "The timeline of a worktree, newest first: every checkpoint across sessions "
         "and attempts, and the captures that failed (gaps). " + _READ, m.LogIn, m.LogOut, log),
    Tool("gaps", "The captures of a run that could not be taken, and why. " + _READ,
         m.GapsIn, m.GapsOut, gaps),
    Tool("attempts", "A run's attempts with their jj_pointer. " + _READ,
         m.RunIdIn, m.AttemptsOut, attempts),
    Tool("restore", "Restore the worktree (or only some paths) to a checkpoint. A checkpoint of "
         "the tree as it is is taken first; the answer's `undo` is the restore call that puts "
         "it back. dry_run=true only lists what would change.",
         m.RestoreIn, m.RestoreOut, restore, read_only=False),
    Tool("rewind", "Go back to right after one tool call of a session (seq or call id): the "
         "files as they were then (a checkpoint of the tree is taken first: the answer's "
         "code.pre_restore undoes it) and a new session of the agent whose conversation ends "
         "with that call's result (the original is unchanged; conversation.resume continues "
         "it). dry_run=true only lists what would change.",
         m.RewindIn, m.RewoundOut, rewind, read_only=False),
    Tool("snapshot_now", "Take a checkpoint of the worktree now (e.g. before a risky step).",
         m.SnapshotIn, m.SnapshotOut, snapshot_now, read_only=False),
    Tool("runs", "List the engine's runs, newest first. " + _READ, m.NoIn, m.RunsOut, runs),
    Tool("run_status", "A run's tasks, attempts (with jj_pointer and latest checkpoint) and "
         "outputs. " + _READ, m.RunStatusIn, m.RunStatusOut, run_status),
    Tool("service_status", "Whether the snapshot service runs (without it, hooks capture "
         "in process). " + _READ, m.NoIn, m.ServiceStatusOut, service_status),
    Tool("logs", "A run's event log (attempts, checkpoints, gaps, restores, approvals): the "
         "newest `limit` events, oldest first, and the total. " + _READ,
         m.LogsIn, m.LogsOut, logs),
    Tool("gc_preview", "What `durability gc` would drop from this worktree's repository under "
         "the retention policy (a dry run: nothing is deleted; gc itself is a person's "
         "command). " + _READ, m.GcPreviewIn, m.GcPreviewOut, gc_preview),
    Tool("remotes", "The git remotes this worktree's checkpoints are replicated to, and how "
         "many checkpoints each holds, awaits or failed to get. " + _READ,
         m.RemotesIn, m.RemotesOut, remotes),
    Tool("deny", "Deny a gated task of a run; its next resume fails the run there.",
         m.DenyIn, m.DecisionOut, deny, read_only=False),
    Tool("run", "Start a run of a workflow file (as `durability run`). It is recorded and "
         "checked now (a bad file or run id is this call's error) and driven by a worker "
         "process of its own, which outlives this server: the answer comes at once; follow "
         "the run with run_status and logs.", m.RunIn, m.RunOutcomeOut, run, read_only=False),
    Tool("resume", "Resume a run where it stopped (as `durability resume`): completed tasks are "
         "not run again. Claimed now (an owner still at work is this call's error: "
         "RUN_OWNER_ALIVE, RUN_STILL_RUNNING), driven by a worker process of its own.",
         m.ResumeIn, m.RunOutcomeOut, resume, read_only=False),
    Tool("pause", "Pause a run: no new task starts, running ones finish, then it parks as "
         "paused (resume continues it).", m.RunStatusIn, m.RequestOut, pause, read_only=False),
    Tool("cancel", "Cancel a run: running tasks are told to stop and it parks as cancelled "
         "(it can be resumed).", m.RunStatusIn, m.RequestOut, cancel, read_only=False),
    Tool("fork", "Fork a run at a checkpoint of a task into a new run (as `durability fork`): "
         "earlier tasks' outputs are copied, the worktree is restored to the checkpoint, and "
         "the task and what follows run again, under the workflow as it is now, driven by a "
         "worker process of its own.", m.ForkIn, m.RunOutcomeOut, fork, read_only=False),
    Tool("agent_run", "Run an agent CLI (Claude Code, Codex, Gemini) headless on a prompt in "
         "the worktree as a durable one-task run (as `durability agent run`): every tool call "
         "a checkpoint, budgets abort it, a quota moves to the next harness, a resume continues "
         "the same session. Recorded and checked now, driven by a worker process of its own: "
         "the answer comes at once; follow it with run_status and logs.",
         m.AgentRunIn, m.RunOutcomeOut, agent_run, read_only=False),
]

#: Served only with ``--allow-approve``: an agent approving its own gate
#: would make the gate pointless, so a person opts in.
APPROVE = Tool("approve", "Approve a gated task of a run; its next resume continues there.",
               m.ApproveIn, m.DecisionOut, approve, read_only=False)


def tools(here: Here) -> dict[str, Tool]:
    """The tools this server serves, by name."""
    served = [*TOOLS, APPROVE] if here.allow_approve else TOOLS
    return {t.name: t for t in served}
