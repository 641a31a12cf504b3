"""The remotes and replication rows (durability/store/remote_rows.py): the derived outbox,
the states ``snapshots`` shows, the query a garbage collector keeps, and the
import of a remote's checkpoints.  On each backend (``db_location``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from durability.store import AttemptKey, Gap, InvalidValue, NewCheckpoint, NotFound, Store
from durability.store.database import Location
from durability.store.remote_rows import FAILED, PUSHED, Remotes

KEY = AttemptKey("run-1", "node-a", 0, 1)


def _record(store: Store, commit: str, request_id: str, worktree: str = "/w") -> None:
    store.record_checkpoint(NewCheckpoint(key=KEY, commit_id=commit, worktree=worktree,
                                          source="manual", request_id=request_id))


def test_pending_is_every_checkpoint_of_a_worktree_with_a_remote_until_pushed(
        db_location: Location) -> None:
    store = Store(db_location)
    remotes = Remotes(db_location)
    _record(store, "a" * 40, "r1")
    assert remotes.pending() == []  # no remote: nothing is due anywhere
    remotes.add("/w", "backup", "file:///b.git")
    _record(store, "b" * 40, "r2")
    _record(store, "c" * 40, "r3", worktree="/elsewhere")
    due = remotes.pending()
    # Checkpoints taken before the remote was named are due too; another
    # worktree's are not.
    assert [p.checkpoint.request_id for p in due] == ["r1", "r2"]
    remotes.mark(due[:1], PUSHED)
    assert [p.checkpoint.request_id for p in remotes.pending()] == ["r2"]
    assert [c.request_id for c in remotes.unreplicated()] == ["r2"]
    assert remotes.unreplicated("/elsewhere") == []
    remotes.mark(remotes.pending(), FAILED, "unreachable")
    [still] = remotes.pending()  # failed is still due: it is retried
    assert still.state == FAILED
    assert remotes.states(store.checkpoints("run-1")) == {
        "r1": {"backup": "pushed"}, "r2": {"backup": "failed"}}


def test_removing_a_remote_forgets_what_was_pushed_to_it(db_location: Location) -> None:
    store = Store(db_location)
    remotes = Remotes(db_location)
    remotes.add("/w", "backup", "file:///b.git")
    _record(store, "a" * 40, "r1")
    remotes.mark(remotes.pending(), PUSHED)
    assert remotes.remove("/w", "backup").url == "file:///b.git"
    with pytest.raises(NotFound):
        remotes.remove("/w", "backup")
    remotes.add("/w", "backup", "file:///another.git")  # another repository, same name
    assert [p.checkpoint.request_id for p in remotes.pending()] == ["r1"]


def test_a_name_is_used_once_per_worktree(db_location: Location) -> None:
    remotes = Remotes(db_location)
    remotes.add("/w", "backup", "file:///b.git")
    remotes.add("/v", "backup", "file:///c.git")
    with pytest.raises(InvalidValue):
        remotes.add("/w", "backup", "file:///d.git")
    assert [(r.worktree, r.url) for r in remotes.all()] == [("/v", "file:///c.git"),
                                                            ("/w", "file:///b.git")]


def test_imported_checkpoints_keep_their_seq_and_are_not_pushed_back(
        tmp_path: Path, db_location: Location) -> None:
    source = Store(tmp_path / "a.db")  # the other machine's: it only makes the rows
    for i, c in enumerate("abc"):
        _record(source, c * 40, f"r{i}")
    rows = [replace(c, worktree="/there") for c in source.checkpoints("run-1")]
    remotes = Remotes(db_location)
    remotes.add("/there", "backup", "file:///b.git")
    assert remotes.import_checkpoints(rows[1:], pushed_to="backup") == 2
    assert remotes.import_checkpoints(rows, pushed_to="backup") == 1  # idempotent
    store = Store(db_location)
    assert [(c.seq, c.commit_id) for c in store.checkpoints("run-1")] == [
        (1, "a" * 40), (2, "b" * 40), (3, "c" * 40)]
    [attempt] = store.attempts("run-1")
    assert attempt.jj_pointer == "c" * 40
    assert remotes.pending() == []
    # A later capture continues the seq.
    _record(store, "d" * 40, "r9", worktree="/there")
    assert store.checkpoint(KEY).seq == 4


def test_an_imported_row_whose_request_is_a_gap_here_is_not_recorded(
        tmp_path: Path, db_location: Location) -> None:
    """A remote's entry carrying the request id of a gap on record here
    (forged, or stale) is skipped as one carrying another checkpoint's: each
    request is on record once, checkpoint or gap.  The gap stands; nothing
    of the entry is recorded, marked pushed or queued for another remote."""
    source = Store(tmp_path / "a.db")  # the other machine's: it only makes the rows
    for i, c in enumerate("ab"):
        _record(source, c * 40, f"r{i}")
    rows = [replace(c, worktree="/there") for c in source.checkpoints("run-1")]
    store = Store(db_location)
    assert store.add_gaps([Gap(1, KEY.run_id, "r1", "timeout", KEY.node_id, KEY.iteration,
                               KEY.attempt, "/there", "hook")]) == 1
    remotes = Remotes(db_location)
    remotes.add("/there", "backup", "file:///b.git")
    remotes.add("/there", "mirror", "file:///m.git")
    assert remotes.import_checkpoints(rows, pushed_to="backup") == 1
    assert remotes.import_checkpoints(rows, pushed_to="backup") == 0
    gap = store.request_record("r1")
    assert isinstance(gap, Gap) and gap.reason == "timeout"
    assert [(c.seq, c.request_id) for c in store.checkpoints("run-1")] == [(1, "r0")]
    [attempt] = store.attempts("run-1")
    assert attempt.jj_pointer == "a" * 40
    assert [(p.checkpoint.request_id, p.remote.name) for p in remotes.pending()] == [
        ("r0", "mirror")]


def test_an_import_that_contradicts_the_record_is_refused(db_location: Location) -> None:
    store = Store(db_location)
    _record(store, "a" * 40, "r1")
    other = replace(store.checkpoints("run-1")[0], commit_id="f" * 40, request_id="x")
    with pytest.raises(InvalidValue):
        Remotes(db_location).import_checkpoints([other])
