"""An isolated worktree stays under ``$DURABILITY_HOME/worktrees``: a
symlink planted where it is to be made (``worktrees/durability-<hash>``,
pointing outside) is removed, never worked through, and the folder it
pointed to is left as it was.  Real jj and git, the installed CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.worktree_ops.isolation import worktree_name
from tests.durability.runs import isokit
from tests.helpers import cli

ONE = """
workflow = Workflow("confined", worktree="isolated")


@workflow.task()
def one(ctx):
    log(worktree=ctx.worktree)
    Path(ctx.worktree, "one.txt").write_text("one\\n")
    return {"ok": True}
"""


@pytest.mark.parametrize("backend", ["jj", "git"])
def test_a_symlinked_worktree_entry_is_not_worked_through(tmp_path: Path,
                                                          backend: str) -> None:
    folder = tmp_path / "wf"
    isokit.write(folder, ONE)
    repo = isokit.make_repo(tmp_path / "repo", backend)
    outside = tmp_path / "outside"
    outside.mkdir()  # empty: a jj workspace could be made right in it
    entries = tmp_path / "state" / "worktrees"
    entries.mkdir(parents=True, mode=0o700)
    link = entries / worktree_name("s1", "one", 0)
    link.symlink_to(outside)

    done = cli("run", str(folder / "wf.py"), "--run-id", "s1", "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    assert os.listdir(outside) == [], "nothing was written through the link"
    [seen] = isokit.side(folder)
    assert seen["worktree"] == str(link)
    assert not link.is_symlink() and not link.exists(), "the task's own folder was removed"
    assert (repo / "one.txt").read_text() == "one\n"
