"""``durability gc`` on real jj and git repositories: dry run, expiry by age,
keepers, restore of what it kept, and seq after gc.  The clock is injected
(``Recorder``'s ManualClock for the rows, ``run_gc(now_ms=...)`` for gc)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.config import Settings
from durability.restore.apply import restore
from durability.retention.gc import run_gc
from durability.retention.policy import Policy
from durability.store import AttemptKey, Checkpoint, Store
from durability.store.gc_rows import record_undo_point
from tests.durability.retention.gckit import (
    DAY,
    KEY,
    T0,
    Recorder,
    blob_of,
    daily,
    file_at,
    has_object,
    make_repo,
    store_git,
)
from tests.helpers import git, run_cli, run_cli_json

# Nothing thinned: only age against keep_all_days, and objects pruned at once.
AGE_ONLY = Policy(keep_all_days=2.5, hourly_days=0, daily_days=0, pre_restore_days=0,
                  jj_op_log_days=1, prune_grace_s=0)


def _rows(store: Store) -> list[Checkpoint]:
    return store.checkpoints(KEY.run_id)


def _refs(worktree: Path) -> dict[str, str]:
    repo = store_git(worktree)
    return {name: str(repo.references[name].target) for name in repo.references
            if name.startswith("refs/")}


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_dry_run_changes_nothing(kind: str, tmp_path: Path, settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt")
    rec = daily(settings, wt, 4)
    rows, refs = _rows(rec.store), _refs(wt)
    files = sorted(p.relative_to(wt) for p in wt.rglob("*") if p.is_file())
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 10 * DAY, dry_run=True)
    assert report.to_dict()["checkpoints"] == {
        "before": 4, "dropped": 3, "kept": 1, "kept_by": {"newest": 1}}
    assert _rows(rec.store) == rows
    assert _refs(wt) == refs
    assert sorted(p.relative_to(wt) for p in wt.rglob("*") if p.is_file()) == files
    rec.close()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_expiry_by_age_drops_rows_refs_and_objects(kind: str, tmp_path: Path,
                                                   settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt")
    rec = daily(settings, wt, 5)  # seq 1..5 at T0, T0+1d, ... T0+4d
    now = T0 + 5 * DAY  # ages 5d, 4d, 3d, 2d, 1d
    old_blobs = [blob_of(rec.content[(KEY, s)]) for s in (1, 2, 3)]
    assert all(has_object(wt, b) for b in old_blobs)
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=now).to_dict()
    assert [r.seq for r in _rows(rec.store)] == [4, 5]
    assert report["checkpoints"]["dropped"] == 3
    assert report["checkpoints"]["kept_by"] == {"newest": 1, "recent": 1}
    assert report["bytes"]["after"] < report["bytes"]["before"]
    assert report["objects"]["after"] < report["objects"]["before"]
    if kind == "jj":
        assert report["refs"]["removed"] == 3  # one pin per dropped commit
    for blob in old_blobs:  # the content only the dropped checkpoints held is gone
        assert not has_object(wt, blob)
    for row in _rows(rec.store):  # and the kept ones still resolve
        assert file_at(wt, row.commit_id) == rec.content[(KEY, row.seq)]
    rec.close()


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_kept_checkpoints_restore_after_gc(kind: str, tmp_path: Path,
                                           settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt")
    rec = daily(settings, wt, 5)
    run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 5 * DAY)
    rec.close()
    shown = run_cli_json("show", KEY.run_id, "--node", KEY.node_id, "--seq", "5")
    assert "work.txt" in json.dumps(shown)
    diff = run_cli("diff", KEY.run_id, "--node", KEY.node_id, "--seq", "4", "--to", "5")
    assert diff.returncode == 0, diff.stderr
    assert "state 5" in diff.stdout
    for seq in (4, 5):
        restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=seq)
        assert (wt / "work.txt").read_bytes() == rec.content[(KEY, seq)]


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_seq_keeps_rising_after_gc(kind: str, tmp_path: Path, settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt")
    rec = daily(settings, wt, 4)
    run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 30 * DAY)
    assert [r.seq for r in _rows(rec.store)] == [4]
    out = rec.capture()
    assert out.seq == 5
    assert file_at(wt, str(out.commit_id)) == rec.content[(KEY, 5)]
    if kind == "git":  # the rewritten chain goes on: the new commit's parent is seq 4's
        parent = store_git(wt)[str(out.commit_id)].parent_ids[0]
        assert str(parent) == _rows(rec.store)[0].commit_id
    rec.close()


def test_unfinished_run_keeps_everything(tmp_path: Path, settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = daily(settings, wt, 3)
    with rec.store._conn() as conn:  # an engine run still running
        conn.execute("UPDATE runs SET state='running' WHERE run_id=$1", (KEY.run_id,))
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 30 * DAY).to_dict()
    assert report["checkpoints"]["dropped"] == 0
    assert report["checkpoints"]["kept_by"] == {"unfinished-run": 3}
    with rec.store._conn() as conn:
        conn.execute("UPDATE runs SET state='finished' WHERE run_id=$1", (KEY.run_id,))
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 30 * DAY).to_dict()
    assert report["checkpoints"]["dropped"] == 2
    rec.close()


def test_extra_keeper_and_pre_restore_window(tmp_path: Path, settings: Settings) -> None:
    wt = make_repo("jj", tmp_path / "wt")
    rec = Recorder(settings, wt)
    rec.capture()                                  # seq 1: kept by the extra keeper
    rec.clock.advance(DAY)
    rec.capture(source="pre-restore")              # seq 2: an undo, named 9 days before gc
    record_undo_point(rec.store, KEY, 2)
    rec.clock.advance(DAY)
    rec.capture()                                  # seq 3: expires
    rec.clock.advance(DAY)
    rec.capture()                                  # seq 4: newest
    policy = Policy(keep_all_days=1, hourly_days=0, daily_days=0, pre_restore_days=10,
                    jj_op_log_days=0, prune_grace_s=0)

    def not_pushed(c: Checkpoint) -> str | None:
        return "not-pushed" if c.seq == 1 else None

    report = run_gc(settings, rec.store, policy, now_ms=T0 + 10 * DAY,
                    keepers=[not_pushed]).to_dict()
    assert report["checkpoints"]["kept_by"] == {"newest": 1, "not-pushed": 1, "pre-restore": 1}
    assert [r.seq for r in _rows(rec.store)] == [1, 2, 4]
    rec.close()


def test_git_gc_keeps_the_users_refs_head_and_index(tmp_path: Path,
                                                    settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    (wt / "staged.txt").write_text("staged\n")
    git(wt, "add", "staged.txt")
    head, index = git(wt, "rev-parse", "HEAD").stdout, (wt / ".git" / "index").read_bytes()
    rec = daily(settings, wt, 4)
    run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 30 * DAY)
    assert git(wt, "rev-parse", "HEAD").stdout == head
    assert (wt / ".git" / "index").read_bytes() == index
    assert git(wt, "status", "--porcelain").stdout.splitlines()[0] == "A  staged.txt"
    # The kept checkpoint's commit sits on the user's HEAD, as a first capture's does.
    kept = store_git(wt)[_rows(rec.store)[0].commit_id]
    assert str(kept.parent_ids[0]) == head.strip()
    rec.close()


def test_two_attempts_on_one_jj_commit_keep_its_pin(tmp_path: Path,
                                                    settings: Settings) -> None:
    """Two sessions capture the same jj working copy: the commit one of them
    drops is the other's newest, and its pin must stay."""
    wt = make_repo("jj", tmp_path / "wt")
    rec = Recorder(settings, wt)
    other = AttemptKey("sess-other", "session", 0, 1)
    first = rec.capture(b"shared\n")
    same = rec.capture(b"shared\n", key=other)
    assert same.commit_id == first.commit_id
    rec.clock.advance(DAY)
    rec.capture()  # KEY's newest: seq 1 may now go
    run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 30 * DAY)
    assert [r.seq for r in _rows(rec.store)] == [2]
    assert f"refs/durability/jj/{first.commit_id}" in _refs(wt)
    assert file_at(wt, str(first.commit_id)) == b"shared\n"
    rec.close()


def test_gc_after_an_interrupted_rewrite_loses_nothing(tmp_path: Path,
                                                       settings: Settings) -> None:
    """A gc killed after moving a chain and before recording the new ids: the
    rows still name the old chain, which only the pending ref keeps.  The
    next gc finishes that rewrite (test_gc_killed.py) and thins as usual:
    every row left resolves, and only the expired ones go."""
    from durability.backends import history as backend_prune

    wt = make_repo("git", tmp_path / "wt")
    rec = daily(settings, wt, 4)
    rows = _rows(rec.store)
    backend_prune.rewrite_chain(store_git(wt), KEY, {rows[0].commit_id})  # then "killed"
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 30 * DAY).to_dict()
    for row in _rows(rec.store):  # every row left still resolves...
        assert file_at(wt, row.commit_id) == rec.content[(KEY, row.seq)]
    assert [r.seq for r in _rows(rec.store)] == [4]  # ...and only the expired went
    assert "interrupted" in report["repositories"][0]["note"]
    rec.close()


def test_jj_op_log_is_kept_when_the_repo_has_several_workspaces(
        tmp_path: Path, settings: Settings) -> None:
    """Abandoning operations would rewrite the one another workspace's
    working copy names: gc drops rows and pins there, never operations."""
    from tests.helpers import jj, make_jj_repo

    wt = make_jj_repo(tmp_path / "wt", colocate=False)
    jj(wt, "workspace", "add", str(tmp_path / "second"))
    rec = daily(settings, wt, 3)
    ops_before = jj(wt, "op", "log", "--no-graph", "-T", 'id ++ "\\n"',
                    "--ignore-working-copy").stdout
    report = run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 30 * DAY).to_dict()
    assert report["checkpoints"]["dropped"] == 2
    assert report["repositories"][0]["note"] == "jj op log kept: the repo has several workspaces"
    assert report["repositories"][0]["op_log_abandoned"] == 0
    assert jj(wt, "op", "log", "--no-graph", "-T", 'id ++ "\\n"',
              "--ignore-working-copy").stdout == ops_before
    jj(tmp_path / "second", "status")  # the other workspace is not stale
    rec.close()


def test_file_modes_kept_by_a_pre_restore_follow_its_new_commit(
        tmp_path: Path, settings: Settings) -> None:
    """A restore keeps the modes of the files it replaces beside its
    pre-restore commit (refs/durability/modes/<commit>); when gc writes the
    chain again, that commit gets a new id and the modes must follow it."""
    import os

    wt = make_repo("git", tmp_path / "wt")
    secret = wt / "secret.txt"
    rec = Recorder(settings, wt)
    secret.write_text("one\n")
    os.chmod(secret, 0o600)
    rec.capture()                                   # seq 1
    rec.clock.advance(DAY)
    secret.write_text("two\n")
    rec.capture()                                   # seq 2
    rec.close()
    # The tree is seq 2's: the pre-restore capture is seq 2 itself (dedup),
    # and the modes are kept beside seq 2's commit.
    done = restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=1)
    assert done.pre_restore_seq == 2
    with Store(settings.database) as store:
        policy = Policy(keep_all_days=0, hourly_days=0, daily_days=0, pre_restore_days=30,
                        jj_op_log_days=0, prune_grace_s=0)
        report = run_gc(settings, store, policy, now_ms=T0 + 5 * DAY).to_dict()
        kept = _rows(store)
    assert [r.seq for r in kept] == [2]
    assert report["rewritten"] == 1
    assert kept[0].commit_id != done.pre_restore_commit
    refs = _refs(wt)
    assert f"refs/durability/modes/{done.pre_restore_commit}" not in refs
    assert f"refs/durability/modes/{kept[0].commit_id}" in refs
    secret.write_text("three\n")
    os.chmod(secret, 0o644)
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=2)
    assert secret.read_text() == "two\n"
    assert secret.stat().st_mode & 0o777 == 0o600


def test_capture_after_gc_dropped_the_restored_checkpoint(tmp_path: Path,
                                                          settings: Settings) -> None:
    """After a restore, the git backend's private index holds the restored
    checkpoint's blobs; git prunes by its own index only, so gc must keep what
    ours names, or the next capture finds entries whose blobs are gone."""
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    (wt / "a.txt").write_text("first body of a\n")
    rec.capture()                                   # seq 1
    rec.clock.advance(DAY)
    (wt / "a.txt").write_text("second body of a\n")
    rec.capture()                                   # seq 2
    restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=1)
    run_gc(settings, rec.store, AGE_ONLY, now_ms=T0 + 30 * DAY)
    assert [r.seq for r in _rows(rec.store)] == [2]
    out = rec.capture()                             # a.txt unchanged since the restore
    assert file_at(wt, str(out.commit_id), "a.txt") == b"first body of a\n"
    rec.close()
