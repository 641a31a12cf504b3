"""A git gc killed mid-rewrite (kill -9 between moving an attempt's chain
and recording the new ids, or between recording them and letting go of the
old chain): a capture and a restore after it work, and the next gc finishes
the job instead of leaving the attempt unthinned, with a ``gc-pending`` ref
pinning the old chain, forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.backends import history as backend_prune
from durability.backends.git_commit import key_ref
from durability.config import Settings
from durability.restore.apply import restore
from durability.retention.gc import run_gc
from durability.retention.policy import Policy
from durability.store import Checkpoint, Store
from durability.store import gc_rows as store_prune
from tests.durability.retention.gckit import DAY, KEY, T0, Recorder, file_at, make_repo, store_git

AGE_ONLY = Policy(keep_all_days=2.5, hourly_days=0, daily_days=0, pre_restore_days=0,
                  jj_op_log_days=1, prune_grace_s=0)


def _rows(store: Store) -> list[Checkpoint]:
    return store.checkpoints(KEY.run_id)


def _pending(wt: Path) -> list[str]:
    return [n for n in store_git(wt).references if n.startswith(backend_prune.PENDING_PREFIX)]


@pytest.mark.parametrize("killed", ["before-store", "before-unpin"])
def test_after_a_killed_gc_capture_restore_and_the_next_gc_work(
        tmp_path: Path, settings: Settings, killed: str) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    for _ in range(4):
        rec.capture()
        rec.clock.advance(DAY)
    first = _rows(rec.store)[0]
    moved, dropped = backend_prune.rewrite_chain(store_git(wt), KEY, {first.commit_id})
    assert dropped == [first.commit_id]
    if killed == "before-unpin":
        store_prune.apply(rec.store, [first], moved)
    assert _pending(wt)
    rec.capture()  # after the kill: appends to the moved chain
    for row in _rows(rec.store):
        restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=row.seq)
        assert (wt / "work.txt").read_bytes() == rec.content[(KEY, row.seq)]
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 4 * DAY).to_dict()
    assert _pending(wt) == []
    # seqs 1-2 are past 2.5 days (3-5 are younger; the restores' pre-restore
    # checkpoints, 6 on, are stamped by the wall clock, all but the newest older)
    assert [r.seq for r in _rows(rec.store) if r.seq <= 5] == [3, 4, 5]
    assert report["repositories"][0]["note"] == "finished an interrupted gc of an attempt"
    for row in _rows(rec.store):
        if (KEY, row.seq) in rec.content:  # a pre-restore holds another restore's tree
            assert file_at(wt, row.commit_id) == rec.content[(KEY, row.seq)]
    # the store names the attempt's current chain, nothing else
    git = store_git(wt)
    chain = {str(c.id) for c in git.walk(git.references[key_ref(KEY)].target)}
    assert {r.commit_id for r in _rows(rec.store)} <= chain
    rec.close()
