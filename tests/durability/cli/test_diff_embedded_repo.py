"""``diff --worktree`` names an embedded git repository as the documented
file object: its path, mode ``160000``, never a ``vendor/lib/`` "file" of
mode ``040000``.

Found in a new user's trial: an agent that runs ``git init`` (or ``git clone``)
inside a jj working copy.  libgit2 does not enter a repository nested in the
worktree and reports it as one untracked folder, which ``diff --worktree``
listed as ``added +0 -0 vendor/lib/`` (``"new_mode": "040000"`` in --json), a
mode the documented file object does not have.  It is what ``git add -A``
(and the git backend) records for it: a gitlink.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import git, make_git_repo, make_jj_repo, run_cli, run_cli_json


@pytest.mark.parametrize("kind", ["jj", "git"])
def test_an_embedded_repository_is_a_gitlink_in_the_worktree_diff(
        tmp_path: Path, kind: str) -> None:
    repo = make_jj_repo(tmp_path / "repo") if kind == "jj" else make_git_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    run_cli_json("snapshot", str(repo), "--run", "r", "--node", "n")
    inner = make_git_repo(repo / "vendor" / "lib")
    assert (inner / "README.md").is_file()
    files = run_cli_json("diff", "r", "--worktree")["files"]
    assert [(f["status"], f["path"], f["new_mode"]) for f in files] == [
        ("added", "vendor/lib", "160000")], files
    stat = run_cli("diff", "r", "--worktree", "--stat")
    assert "vendor/lib (submodule)" in stat.stdout, stat.stdout
    git(inner, "status")  # the inner repository is untouched
