"""gc and replication: a checkpoint not yet on its worktree's remote is never
dropped, and a git worktree with a remote keeps its chains whole (thinning
rewrites a chain, which the remote would then refuse: pushes are never forced)."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.config import Settings
from durability.retention.gc import extra_keepers, run_gc
from durability.retention.policy import Policy
from durability.store.remote_rows import Remotes
from tests.durability.retention.gckit import DAY, KEY, T0, daily, make_repo
from tests.helpers import git

AGE_ONLY = Policy(keep_all_days=2.5, hourly_days=0, daily_days=0, pre_restore_days=0,
                  jj_op_log_days=1, prune_grace_s=0)


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_unpushed_checkpoints_are_kept_then_pushed_ones_follow_the_policy(
        kind: str, tmp_path: Path, settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt")
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    rec = daily(settings, wt, 4)
    remotes = Remotes(settings.database)
    remotes.add(str(wt), "backup", bare.as_uri())

    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 10 * DAY,
                    keepers=extra_keepers(settings)).to_dict()
    assert report["checkpoints"]["dropped"] == 0
    assert report["checkpoints"]["kept_by"] == {"newest": 1, "not-pushed": 3}
    assert [c.seq for c in rec.store.checkpoints(KEY.run_id)] == [1, 2, 3, 4]

    remotes.mark(remotes.pending(), "pushed")
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 10 * DAY,
                    keepers=extra_keepers(settings)).to_dict()
    if kind == "git":
        assert report["checkpoints"]["kept_by"] == {"newest": 1, "replicated": 3}
        assert [c.seq for c in rec.store.checkpoints(KEY.run_id)] == [1, 2, 3, 4]
    else:
        assert report["checkpoints"]["dropped"] == 3
        assert [c.seq for c in rec.store.checkpoints(KEY.run_id)] == [4]
    rec.close()


def test_no_remote_no_keeper(settings: Settings) -> None:
    assert extra_keepers(settings) == []
