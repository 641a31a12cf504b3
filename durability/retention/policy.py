"""The retention policy: which checkpoints ``durability gc`` may drop.

Pure: rows and a clock in, a verdict per row out; nothing here touches a
repository or the store.  The defaults and the config file are documented in
docs/how-to/retention.md.

A checkpoint is kept when any keeper claims it, in this order:

1. ``unfinished-run``: its run is an engine run that is not finished
   (running, waiting, paused).  A hook session has no engine state and is
   judged by age like a finished run.
2. ``newest``: it is its attempt's newest checkpoint (highest seq, or the
   commit its ``jj_pointer`` names), kept forever.
3. ``resume-start``: what a resume of an engine run in any state starts
   from (a finished, failed or cancelled run can be resumed): the ``attempt
   start`` checkpoint of a task's first attempt (``on_resume=clean``) and the
   run's newest checkpoint of each worktree that is not a pre-restore one
   (continue).
4. an extra keeper handed in (``Keeper``): replication's "not yet pushed".
5. ``recent``: younger than ``keep_all_days``; ``recent-call``: named by a
   tool-call boundary recorded less than ``keep_all_days`` ago (a call that
   changed nothing dedups onto an older row: the tree it left is that row,
   so every call of the window can be rewound, decision 0057).
6. ``pre-restore``: a checkpoint a restore named as its undo, for
   ``pre_restore_days`` after the last restore that named it (the undo
   record, ``durability.store.gc_rows.record_undo_point``: the pre-restore capture may
   have deduplicated onto an older row of any ``source``).
7. ``hourly`` / ``daily``: the newest checkpoint of its attempt in its hour
   (while younger than ``hourly_days``), then in its day (while younger than
   ``daily_days``).

Everything else expires.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from durability.config import config_file as config_path
from durability.config import config_tables
from durability.ground.errors import InvalidInput
from durability.runs.attempt_checkpoints import ATTEMPT_SOURCE, START_LABEL
from durability.runs.run_rows import ACTIVE
from durability.store import Checkpoint
from durability.store.gc_rows import RetentionRow

__all__ = ["DAY_MS", "HOUR_MS", "MAX_SETTING", "Keeper", "Policy", "Verdict", "config_path",
           "judge", "load_policy"]

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
#: The largest value a setting takes (days, hours or seconds alike): far past
#: any useful window, and small enough that its milliseconds are an exact int.
MAX_SETTING = 1e9

#: A keeper names why a checkpoint must stay, or None to have no say.  The
#: hook point for other features (replication keeps what it has not pushed).
Keeper = Callable[[Checkpoint], "str | None"]


@dataclass(frozen=True)
class Policy:
    """How long checkpoints of finished runs and hook sessions are kept.

    Days are floats so a test or a tight disk can say 0.5; 0 turns a
    window off."""

    #: Every checkpoint younger than this is kept, and every one a tool call
    #: younger than this left the tree in (its boundary names it).
    keep_all_days: float = 7
    #: Then the newest per attempt and hour, up to this age...
    hourly_days: float = 30
    #: ...then the newest per attempt and day, up to this age.
    daily_days: float = 90
    #: A restore's pre-restore checkpoint (its undo) is kept this long.
    pre_restore_days: float = 30
    #: jj only: operations older than this are abandoned from the op log (the
    #: jj undo history) so that jj can collect what they alone kept.  0: never.
    jj_op_log_days: float = 30
    #: Unreachable objects younger than this survive the object gc (a grace
    #: for a concurrent git command); 0 prunes at once.
    prune_grace_s: float = 3600
    #: How often the service runs gc (hours); 0 turns the schedule off.
    service_interval_hours: float = 24

    def with_values(self, values: Mapping[str, Any]) -> Policy:
        """This policy with ``values`` (names as in the config file) set."""
        known = {f.name for f in fields(self)}
        changes: dict[str, float] = {}
        for name, value in values.items():
            if name not in known:
                raise InvalidInput(f"unknown retention setting {name!r} (known: "
                                   f"{', '.join(sorted(known))})")
            # nan fails every comparison (``age < nan`` is false, so it would
            # keep nothing); inf and huge values overflow the int of a time.
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or not 0 <= value <= MAX_SETTING):
                raise InvalidInput(f"retention setting {name} must be a number from 0 to "
                                   f"{MAX_SETTING:.0e}, not {value!r}")
            changes[name] = float(value)
        return replace(self, **changes)

    def to_dict(self) -> dict[str, float]:
        return {f.name: float(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class Verdict:
    row: RetentionRow
    #: Why it stays, or None: it expires.
    kept_by: str | None

    @property
    def expired(self) -> bool:
        return self.kept_by is None


def load_policy(env: Mapping[str, str] = os.environ) -> Policy:
    """The defaults, overridden by the ``[retention]`` table of the config
    file when there is one.  A file that is not valid TOML, or holds an
    unknown or negative setting, is ``invalid-value``: gc never guesses."""
    path, data = config_tables(env)
    table = data.get("retention", {})
    if not isinstance(table, dict):
        raise InvalidInput(f"{path}: [retention] must be a table")
    return Policy().with_values(table)


def judge(rows: Iterable[RetentionRow], policy: Policy, now_ms: int,
          keepers: Sequence[Keeper] = ()) -> list[Verdict]:
    """A verdict for every row (same order)."""
    rows = list(rows)
    survivors = _bucket_survivors(rows, policy, now_ms)
    survivors.update(_resume_starts(rows))
    return [Verdict(row, _kept_by(row, policy, now_ms, keepers, survivors)) for row in rows]


def _kept_by(row: RetentionRow, policy: Policy, now_ms: int, keepers: Sequence[Keeper],
             survivors: dict[int, str]) -> str | None:
    c = row.checkpoint
    if row.run_state in ACTIVE:
        return "unfinished-run"
    if c.seq == row.max_seq or c.commit_id == row.jj_pointer:
        return "newest"
    if survivors.get(id(row)) == "resume-start":
        return "resume-start"
    for keeper in keepers:
        reason = keeper(c)
        if reason:
            return reason
    age = now_ms - c.created_at_ms
    if age < policy.keep_all_days * DAY_MS:
        return "recent"
    called = row.called_at_ms
    if called is not None and now_ms - called < policy.keep_all_days * DAY_MS:
        return "recent-call"
    named = row.undo_named_at_ms
    if named is not None and now_ms - named < policy.pre_restore_days * DAY_MS:
        return "pre-restore"
    return survivors.get(id(row))


def _resume_starts(rows: list[RetentionRow]) -> dict[int, str]:
    """``id(row)`` -> "resume-start" for the checkpoints a resume of an
    engine run goes back to (``durability.runs.attempt_checkpoints.restore_target``):
    per task iteration and worktree, the first attempt's ``attempt start``
    (``on_resume=clean``); per run and worktree, the newest checkpoint that
    is not a pre-restore (continue: a restore's pre-restore checkpoint may be
    its attempt's newest, and a resume never starts from one).  A few rows
    per run; a hook session (no run state) has none."""
    first: dict[tuple[Any, ...], RetentionRow] = {}
    newest: dict[tuple[Any, ...], RetentionRow] = {}
    for row in rows:
        c = row.checkpoint
        if row.run_state is None:
            continue
        if c.source != "pre-restore":
            latest = newest.get((c.run_id, c.worktree))
            if latest is None or _order(c) > _order(latest.checkpoint):
                newest[(c.run_id, c.worktree)] = row
        if c.source != ATTEMPT_SOURCE or c.label != START_LABEL:
            continue
        key = (c.run_id, c.node_id, c.iteration, c.worktree)
        best = first.get(key)
        if best is None or (c.attempt, *_order(c)) < (best.checkpoint.attempt,
                                                      *_order(best.checkpoint)):
            first[key] = row
    return {id(row): "resume-start" for row in [*first.values(), *newest.values()]}


def _order(c: Checkpoint) -> tuple[int, int, int]:
    # restore_target's order: record time, then attempt and seq.
    return (c.created_at_ms, c.attempt, c.seq)


def _bucket_survivors(rows: list[RetentionRow], policy: Policy,
                      now_ms: int) -> dict[int, str]:
    """``id(row)`` -> "hourly" or "daily" for the newest row of its attempt in
    each hour (or day) that is still inside that window."""
    newest: dict[tuple[Any, ...], RetentionRow] = {}
    for row in rows:
        c = row.checkpoint
        age = now_ms - c.created_at_ms
        if age < policy.hourly_days * DAY_MS:
            slot: tuple[Any, ...] = ("hourly", c.created_at_ms // HOUR_MS)
        elif age < policy.daily_days * DAY_MS:
            slot = ("daily", c.created_at_ms // DAY_MS)
        else:
            continue
        bucket = (c.run_id, c.node_id, c.iteration, c.attempt, *slot)
        best = newest.get(bucket)
        if best is None or c.seq > best.checkpoint.seq:
            newest[bucket] = row
    return {id(row): str(bucket[4]) for bucket, row in newest.items()}
