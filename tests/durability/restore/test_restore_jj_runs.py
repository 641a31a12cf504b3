"""How many times a jj restore runs jj (decision 0054): the pre-restore
capture, then one snapshot after the writes, which records them and is the
one the verification reads; a file jj's snapshot leaves untracked (ignored
now) is tracked, and the tree verified from a snapshot taken after that.
The jj runs are counted by a stand-in that runs the real jj
(``DURABILITY_JJ``)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pygit2

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.restore.apply import restore
from durability.store import AttemptKey
from tests.helpers import commit_manifest, jj, jj_path, make_jj_repo, tree_manifest, write_script

RUN = "run-jj-runs"
KEY = AttemptKey(RUN, "n", 0, 1)


def _counting_jj(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose jj logs each command it runs (not ``--version``)."""
    runs = tmp_path / "jj-runs.txt"
    runs.write_text("")
    (tmp_path / "bin").mkdir()
    stand_in = write_script(tmp_path / "bin" / "jj", f"""#!/bin/sh
[ "$1" = "--version" ] && exec {jj_path()} "$@"
for a in "$@"; do case "$a" in log|file) echo "$a" >> {runs}; break;; esac; done
exec {jj_path()} "$@"
""")
    return {**os.environ, "DURABILITY_JJ": str(stand_in)}, runs


def _snap(settings: Settings, wt: Path) -> int:
    done = snapshot_now(settings, key=KEY, path=wt, request_id=str(uuid.uuid4()))
    assert done.ok and done.seq is not None, done
    return done.seq


def _at_tree(wt: Path) -> str:
    """The tree of jj's working-copy commit, as jj holds it now (no snapshot)."""
    commit = jj(wt, "--ignore-working-copy", "log", "-r", "@", "--no-graph",
                "-T", "commit_id").stdout.strip()
    return str(pygit2.Repository(str(wt))[commit].peel(pygit2.Commit).tree_id)


def _tree(wt: Path, commit: str) -> str:
    return str(pygit2.Repository(str(wt))[commit].peel(pygit2.Commit).tree_id)


def test_a_jj_restore_runs_jj_twice_and_jj_records_the_tree(tmp_path: Path) -> None:
    wt = make_jj_repo(tmp_path / "repo").resolve()
    for i in range(30):
        (wt / f"f{i}.txt").write_text(f"one {i}\n")
    settings = Settings.from_env()
    first = _snap(settings, wt)
    for i in range(30):
        (wt / f"f{i}.txt").write_text(f"two {i}\n")
    (wt / "new.txt").write_text("only in two\n")
    _snap(settings, wt)
    env, runs = _counting_jj(tmp_path)

    done = restore(settings, run_id=RUN, node_id="n", seq=first, env=env)

    assert runs.read_text().split() == ["log", "log"]  # pre-restore, after the writes
    assert len(done.changes.write) == 30 and done.changes.delete == ("new.txt",)
    assert tree_manifest(wt) == commit_manifest(wt, done.restored.commit_id)
    # jj's working copy holds the restored tree: the snapshot after the
    # writes recorded it, and the verification compared that same tree.
    assert _at_tree(wt) == _tree(wt, done.restored.commit_id)
    # The undo is as exact (the same two jj runs).
    runs.write_text("")
    undo = restore(settings, run_id=RUN, node_id="n", seq=done.pre_restore_seq, env=env)
    assert runs.read_text().split() == ["log", "log"]
    assert (wt / "new.txt").read_text() == "only in two\n"
    assert tree_manifest(wt) == commit_manifest(wt, undo.restored.commit_id)


def test_a_file_ignored_now_is_tracked_then_verified(tmp_path: Path) -> None:
    """seq 1 holds keep.log; info/exclude ignores *.log afterwards and the
    file goes (seq 2).  Restoring seq 1 writes it back, jj's snapshot leaves
    it untracked, the restore tracks it, and the tree verified is the one
    after that (a fresh snapshot), which jj holds."""
    wt = make_jj_repo(tmp_path / "repo").resolve()
    (wt / "README.md").write_text("hello\n")
    (wt / "keep.log").write_text("kept\n")
    settings = Settings.from_env()
    first = _snap(settings, wt)
    exclude = wt / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("*.log\n")
    (wt / "keep.log").unlink()
    second = _snap(settings, wt)
    assert second != first
    env, runs = _counting_jj(tmp_path)

    done = restore(settings, run_id=RUN, node_id="n", seq=first, env=env)

    assert runs.read_text().split() == ["log", "log", "file", "log"]
    assert (wt / "keep.log").read_text() == "kept\n"
    assert _at_tree(wt) == _tree(wt, done.restored.commit_id)
