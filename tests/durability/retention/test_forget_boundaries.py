"""``forget`` and the tool-call boundaries (decision 0057), on real jj and
git repositories with boundaries recorded by the real hook (in process):
once a secret file is forgotten no row of the state store, no ref and no
object of the checkpoint store leads to it, the calls keep their boundaries
(renamed to the new commits, nothing else changed), and a rewind to the call
that wrote the secret brings back its tree without it; once gc drops that
checkpoint, the rewind answers ``checkpoint-collected``."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pygit2
import pytest

from durability.config import Settings
from durability.retention.forget import run_forget
from durability.retention.gc import run_gc
from durability.retention.policy import DAY_MS, Policy
from durability.store import Store
from durability.store.boundaries import boundaries
from tests.durability.retention.gckit import blob_of, has_object, store_git
from tests.helpers import (
    commit_manifest,
    hook_payload,
    make_git_repo,
    make_jj_repo,
    run_cli,
    run_cli_json,
    tree_manifest,
)
from tests.transcripts import transcript

SESSION = "9d7c1c4e-0000-4000-8000-000000005757"
SECRET = b"API_KEY=sk-live-57-forget-me-0123456789\n"
CALLS = [("t1", "Write"), ("t2", "Write"), ("t3", "Read"), ("t4", "Bash"), ("t5", "Write")]


def _session(tmp_path: Path, kind: str) -> tuple[Path, Path]:
    """t1 writes a.txt, t2 the secret, t3 reads it (no new tree), t4
    deletes it, t5 writes b.txt."""
    repo = (make_git_repo(tmp_path / "repo") if kind == "git"
            else make_jj_repo(tmp_path / "repo"))
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    path = transcript(folder / f"{SESSION}.jsonl", SESSION, CALLS, cwd=str(repo))
    acts = {"t1": lambda: (repo / "a.txt").write_text("a\n"),
            "t2": lambda: (repo / "secret.env").write_bytes(SECRET),
            "t3": lambda: None, "t4": lambda: (repo / "secret.env").unlink(),
            "t5": lambda: (repo / "b.txt").write_text("b\n")}
    for call, tool in CALLS:
        acts[call]()
        payload = hook_payload(repo, session_id=SESSION, tool_use_id=call, tool_name=tool,
                               transcript_path=str(path))
        done = run_cli("snapshot-hook", input=json.dumps(payload))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    return repo, path


def _cells(settings: Settings, store: Store) -> list[tuple[str, str]]:
    """(table, text) of every cell of every table of the state store."""
    found = []
    with store._conn() as conn:
        if settings.database_url is None:
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'").fetchall()]
        else:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()").fetchall()]
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}").fetchall():
                found += [(table, c.decode("utf-8", "replace") if isinstance(c, bytes)
                           else str(c)) for c in row if c is not None]
    return found


def _reaches(repo: pygit2.Repository, blob: str) -> list[str]:
    """The refs of the checkpoint store from which ``blob`` is reachable."""
    def tree_has(tree: pygit2.Tree) -> bool:
        for entry in tree:
            if str(entry.id) == blob:
                return True
            if entry.type_str == "tree" and tree_has(repo[entry.id].peel(pygit2.Tree)):
                return True
        return False

    found = []
    for name in repo.references:
        try:
            tip = repo.references[name].peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            continue
        if any(tree_has(c.tree) for c in repo.walk(tip.id)):
            found.append(name)
    return found


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_a_forgotten_secret_leaves_no_trace_and_its_call_rewinds_without_it(
        tmp_path: Path, kind: str) -> None:
    repo, _ = _session(tmp_path, kind)
    settings = Settings.from_env()
    secret_blob = blob_of(SECRET)
    with Store(settings.database) as store:
        before = {b.seq: b for b in boundaries(store, SESSION)}
        assert [b.checkpoint_seq for b in before.values()] == [1, 2, 2, 3, 4]
        assert _reaches(store_git(repo), secret_blob)  # what forget must take away
        report = run_forget(settings, store, repo, ["secret.env"])
        assert report.holding and report.blobs_left == [] and report.collected
        old = set(report.renamed)
        assert {before[2].commit_id, before[3].commit_id} <= old
        rows = {c.seq: c.commit_id for c in store.checkpoints(SESSION)}
        after = boundaries(store, SESSION)
        # The calls keep their boundaries; only the commit ids moved, each to
        # its row's new commit.
        assert [(b.seq, b.request_id, b.tool_use_id, b.checkpoint_seq, b.created_at_ms)
                for b in after] == [(b.seq, b.request_id, b.tool_use_id, b.checkpoint_seq,
                                     b.created_at_ms) for b in before.values()]
        assert [b.commit_id for b in after] == [rows[b.checkpoint_seq] for b in after]
        # No row of any table names a forgotten commit, the blob or the secret.
        cells = _cells(settings, store)
        needles = [*old, secret_blob, SECRET.decode().strip()]
        assert [(t, n) for t, text in cells for n in needles if n in text] == []
    # No ref names or reaches a forgotten commit, and the objects are gone.
    git_store = store_git(repo)
    assert [n for n in git_store.references if any(o in n for o in old)] == []
    assert [n for n in git_store.references
            if str(git_store.references[n].target) in old] == []
    assert _reaches(git_store, secret_blob) == []
    assert not has_object(repo, secret_blob)
    assert [o for o in old if has_object(repo, o)] == []
    # A rewind to the call that wrote the secret: its tree, without it.
    done = run_cli_json("rewind", SESSION, "--call", "t2")
    assert done["boundary"]["commit_id"] == rows[2]
    assert sorted(tree_manifest(repo)) == sorted(commit_manifest(repo, rows[2]))
    assert (repo / "a.txt").read_text() == "a\n" and not (repo / "secret.env").exists()
    # Once gc dropped the call's checkpoint, the stable refusal.
    with Store(settings.database) as store:
        run_gc(settings, store, Policy(keep_all_days=0, hourly_days=0, daily_days=0,
                                       pre_restore_days=0, jj_op_log_days=0, prune_grace_s=0),
               now_ms=int(time.time() * 1000) + DAY_MS)
        assert [b.collected for b in boundaries(store, SESSION)][:3] == [True, True, True]
    refused = run_cli("rewind", SESSION, "--call", "t2", "--code-only")
    assert refused.returncode == 3
    assert refused.stderr.startswith("durability: checkpoint-collected: boundary seq 2 ")
    assert not (repo / "secret.env").exists()


def test_the_state_store_scan_sees_every_table(tmp_path: Path) -> None:
    """The scan above reads the tables the migrations made, boundaries among them."""
    _session(tmp_path, "git")
    settings = Settings.from_env()
    with Store(settings.database) as store:
        tables = {t for t, _ in _cells(settings, store)}
    assert {"boundaries", "workspace_checkpoints", "attempts", "events"} <= tables
    if settings.database_url is None:
        with sqlite3.connect(settings.db_path) as conn:
            names = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table'").fetchall()}
        assert "boundaries" in names and "run_forks" in names
