"""Which backend captures a worktree: a colocated jj repository on a machine
without jj is captured through its git side, not a jj-missing gap per call."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

from durability.backends.git import GitBackend
from tests.helpers import git, make_jj_repo, run_cli, run_cli_json


def test_a_colocated_repo_without_jj_is_captured_through_git(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo")  # colocated: .jj and .git
    (repo / "a.txt").write_text("one\n")
    env = {**os.environ, "DURABILITY_JJ": str(tmp_path / "no-jj-here")}
    first = run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n", env=env)
    (repo / "a.txt").write_text("two\n")
    second = run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n", env=env)
    assert (first["seq"], second["seq"]) == (1, 2)
    # In the private store, not the user's (jj's) repository: jj sees none of it.
    assert "refs/durability/" not in git(repo, "for-each-ref").stdout
    store = GitBackend.checkpoint_repository(repo)
    assert any(r.startswith("refs/durability/git/") for r in store.references)
    shown = store[second["commit_id"]].peel(pygit2.Commit).tree["a.txt"]
    assert store[shown.id].data == b"two\n"
    assert run_cli("gaps", "r", "--json", env=env).stdout.strip() == "[]"


def test_a_jj_only_repo_without_jj_is_still_a_jj_missing_gap(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo", colocate=False)
    env = {**os.environ, "DURABILITY_JJ": str(tmp_path / "no-jj-here")}
    done = run_cli("snapshot", str(repo), "--run", "r", "--node", "n", env=env)
    assert done.returncode == 5
    assert done.stderr.startswith("durability: jj-missing: ")
