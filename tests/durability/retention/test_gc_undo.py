"""gc keeps what a restore named as its undo for the pre-restore window,
whatever row the pre-restore capture deduplicated onto: the usual case of an
agent restoring right after a tool call, where the tree is already a
checkpoint (``source`` "hook") and no "pre-restore" row is made.  Both
backends, with the CLI's flags and with the default policy on an aged store
(the store's clock and gc's ``now_ms``, no sleeps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.backends.git import forget
from durability.config import Settings
from durability.restore.apply import restore
from durability.retention.gc import run_gc
from durability.retention.policy import Policy
from durability.store import Store
from durability.store.gc_rows import retention_rows
from tests.durability.retention.gckit import DAY, KEY, T0, Recorder, file_at, make_repo
from tests.helpers import run_cli

PRECIOUS = b"v2-precious\n"


def _restored_onto_a_hook_row(settings: Settings, wt: Path, *, start_ms: int = T0,
                              then_ms: int = 0) -> Recorder:
    """seq 1 v1, seq 2 v2-precious (from ``start_ms``), a restore of seq 1
    whose undo is seq 2 (its pre-restore capture deduplicated onto it), then,
    ``then_ms`` later, seq 3 v3."""
    rec = Recorder(settings, wt, start_ms=start_ms)
    rec.capture(b"v1\n")
    rec.capture(PRECIOUS)
    done = restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=1)
    assert done.pre_restore_seq == 2
    assert rec.store.checkpoint(KEY, 2).source == "hook"  # no pre-restore row was made
    rec.clock.advance(then_ms)
    rec.capture(b"v3\n")
    return rec


def _undo_is_intact(settings: Settings, wt: Path, store: Store) -> None:
    row = store.checkpoint(KEY, 2)
    assert file_at(wt, row.commit_id) == PRECIOUS
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=2)
    assert (wt / "work.txt").read_bytes() == PRECIOUS


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_gc_with_every_window_at_zero_keeps_the_undo(kind: str, tmp_path: Path,
                                                     settings: Settings) -> None:
    """The issue's repro through the installed command."""
    wt = make_repo(kind, tmp_path / "wt").resolve()
    try:
        rec = _restored_onto_a_hook_row(settings, wt)
        rec.close()
        done = run_cli("gc", "--keep-all-days", "0", "--hourly-days", "0", "--daily-days", "0",
                       "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["checkpoints"]["kept_by"].get("pre-restore") == 1, report
        with Store(settings.database) as store:
            assert [c.seq for c in store.checkpoints(KEY.run_id)] == [2, 3]
            _undo_is_intact(settings, wt, store)
    finally:
        forget(wt)


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_the_default_policy_eight_days_later_keeps_the_undo_for_its_window(
        kind: str, tmp_path: Path, settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt").resolve()
    try:
        rec = _restored_onto_a_hook_row(settings, wt)
        policy = Policy(prune_grace_s=0)  # the defaults, objects pruned at once
        report = run_gc(settings, rec.store, policy, now_ms=T0 + 8 * DAY).to_dict()
        assert report["checkpoints"]["kept_by"].get("pre-restore") == 1, report
        assert [c.seq for c in rec.store.checkpoints(KEY.run_id)] == [2, 3]
        _undo_is_intact(settings, wt, rec.store)
        # The window is counted from the restore that named it, and it ends.
        report = run_gc(settings, rec.store, policy, now_ms=T0 + 31 * DAY + DAY).to_dict()
        assert "pre-restore" not in report["checkpoints"]["kept_by"], report
        assert [c.seq for c in rec.store.checkpoints(KEY.run_id)] == [3]
        # gc dropped the undo record with its row.
        assert all(r.undo_named_at_ms is None for r in retention_rows(rec.store)
                   if r.checkpoint.seq == 2)
        rec.close()
    finally:
        forget(wt)


def test_a_later_restore_naming_an_old_row_starts_its_window_again(
        tmp_path: Path, settings: Settings) -> None:
    """A row 40 days old that a restore names today is kept 30 days more."""
    wt = make_repo("git", tmp_path / "wt").resolve()
    try:
        rec = _restored_onto_a_hook_row(settings, wt, start_ms=T0 - 40 * DAY,
                                        then_ms=40 * DAY)
        policy = Policy(prune_grace_s=0)
        report = run_gc(settings, rec.store, policy, now_ms=T0 + 20 * DAY).to_dict()
        assert report["checkpoints"]["kept_by"].get("pre-restore") == 1, report
        _undo_is_intact(settings, wt, rec.store)
        rec.close()
    finally:
        forget(wt)
