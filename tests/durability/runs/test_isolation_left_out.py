"""A file an isolated task's checkpoint leaves out (jj's
snapshot.max-new-file-size) is not lost with its worktree: the merge back
refuses, writing nothing and keeping the worktree, and lands it once the
limit allows.  In a shared worktree such a file stays on disk; an isolated
one is deleted after its merge, so merging without it would drop it.  Real
jj, the installed CLI."""

from __future__ import annotations

import os
from pathlib import Path

from durability.runs.isolated import task_worktrees
from durability.runs.run_rows import Runs
from tests.durability.runs import isokit
from tests.helpers import cli, run_cli_json, state_database

BIG = """
workflow = Workflow("big", worktree="isolated")


@workflow.task()
def big(ctx):
    Path(ctx.worktree, "big.bin").write_bytes(b"x" * 5000)
    Path(ctx.worktree, "small.txt").write_text("small\\n")
    return {"ok": True}
"""


def test_a_file_left_out_of_the_task_tree_keeps_the_worktree(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    isokit.write(folder, BIG)
    repo = isokit.make_repo(tmp_path / "repo", "jj")
    small_limit = {**os.environ, "DURABILITY_MAX_NEW_FILE_SIZE": "1000"}
    done = cli("run", str(folder / "wf.py"), "--run-id", "b1", "--worktree", str(repo),
               env=small_limit)
    assert done.returncode == 16, (done.returncode, done.stderr)  # as a conflict: not merged
    assert done.stderr.startswith("durability: WORKTREE_MERGE_FAILED: "), done.stderr
    assert "big.bin" in done.stderr and "DURABILITY_MAX_NEW_FILE_SIZE" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (repo / "big.bin").exists() and not (repo / "small.txt").exists(), \
        "nothing merged"
    with Runs(state_database()) as runs:
        [row] = task_worktrees(runs, "b1")
    assert Path(row.path, "big.bin").stat().st_size == 5000, "the worktree is kept"
    assert run_cli_json("run-status", "b1")["error"]["code"] == "WORKTREE_MERGE_FAILED"

    again = cli("resume", "b1")  # the default limit takes the file
    assert again.returncode == 0, again.stderr
    assert (repo / "big.bin").stat().st_size == 5000
    assert (repo / "small.txt").read_text() == "small\n"
    assert not Path(row.path).exists()
