"""The collected boundaries a listing shows (decision 0061), on SQLite and
PostgreSQL: those of the attempts with a checkpoint in the worktree (not
those of another worktree's attempts, nor the kept ones), found by attempt
after the worktree moved, newest first and cut at the limit; or one
session's."""

from __future__ import annotations

from durability.store import AttemptKey, NewCheckpoint, Store
from durability.store.boundaries import NewBoundary, collected_boundaries, record_boundaries
from durability.store.database import Location
from durability.store.gc_rows import apply

HERE = AttemptKey("sess-a", "session", 0, 1)
#: The same session, another attempt, in another worktree (an isolated task).
ELSEWHERE = AttemptKey("sess-a", "task", 0, 1)
OTHER = AttemptKey("sess-b", "session", 0, 1)


_COMMITS = iter(range(1, 1_000))


def _record(store: Store, key: AttemptKey, worktree: str, calls: list[str]) -> None:
    """A checkpoint per call, each call's boundary naming it, then a last
    checkpoint (the attempt's newest, which gc keeps)."""
    for n, call in enumerate(calls):
        done = store.record_checkpoint(NewCheckpoint(
            key=key, commit_id=f"{next(_COMMITS):040x}", worktree=worktree,
            source="hook", request_id=f"r-{key.run_id}-{key.node_id}-{n}"))
        record_boundaries(store, [NewBoundary(
            key=key, request_id=f"b-{call}", checkpoint_seq=done.seq, commit_id=done.commit_id,
            worktree=worktree, harness="claude", tool_use_id=call, tool_name="Write")])
    store.record_checkpoint(NewCheckpoint(key=key, commit_id=f"{next(_COMMITS):040x}",
                                          worktree=worktree, source="hook",
                                          request_id=f"r-{key.run_id}-{key.node_id}-last"))


def _drop_all_but_newest(store: Store, key: AttemptKey) -> None:
    rows = store.checkpoints(key.run_id)
    apply(store, [c for c in rows if c.key == key][:-1], {})


def test_a_worktree_s_collected_calls_by_attempt_newest_first(db_location: Location) -> None:
    with Store(db_location) as store:
        _record(store, HERE, "/w", ["t1", "t2", "t3"])
        _record(store, ELSEWHERE, "/iso", ["u1"])
        _record(store, OTHER, "/w", ["v1"])
        assert collected_boundaries(store, worktree="/w") == []  # nothing dropped yet
        for key in (HERE, ELSEWHERE, OTHER):
            _drop_all_but_newest(store, key)
        found = collected_boundaries(store, worktree="/w")
        assert [(b.run_id, b.tool_use_id) for b in found] == [
            ("sess-b", "v1"), ("sess-a", "t3"), ("sess-a", "t2"), ("sess-a", "t1")]
        assert all(b.collected for b in found)
        assert [b.tool_use_id for b in collected_boundaries(store, worktree="/iso")] == ["u1"]
        assert [b.tool_use_id for b in collected_boundaries(store, worktree="/w", limit=2)] == [
            "v1", "t3"]
        assert [b.tool_use_id for b in collected_boundaries(store, run_id="sess-a")] == [
            "u1", "t3", "t2", "t1"]
        # Moved: the checkpoints are re-keyed, the boundaries keep the old path.
        store.move_worktree("/w", "/moved")
        assert collected_boundaries(store, worktree="/w") == []
        moved = collected_boundaries(store, worktree="/moved")
        assert [b.tool_use_id for b in moved] == ["v1", "t3", "t2", "t1"]
        assert {b.worktree for b in moved} == {"/w"}
