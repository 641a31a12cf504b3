"""kill -9 while an isolated task's tree is being written into the shared
worktree (the merge back): the resume runs the task again and merges again,
and the shared worktree ends with every file once, none lost, the output
recorded once.  Real jj and git, the installed CLI, a real SIGKILL."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from durability.runs.run_rows import Runs
from tests.durability.runs import isokit
from tests.helpers import cli, durability_exe, state_database, wait_for

FILES = 600

MANY = f"""
workflow = Workflow("many", worktree="isolated")


@workflow.task()
def many(ctx):
    log(attempt=ctx.attempt)
    for i in range({FILES}):
        Path(ctx.worktree, f"f{{i:04d}}.txt").write_text(f"file {{i}}\\n" * 20)
    return {{"files": {FILES}}}
"""


def _written(repo: Path) -> int:
    return sum(1 for n in os.listdir(repo) if n.startswith("f"))


@pytest.mark.parametrize("backend", ["jj", "git"])
def test_kill_9_mid_merge_back_then_resume_lands_every_file_once(tmp_path: Path,
                                                                 backend: str) -> None:
    folder = tmp_path / "wf"
    isokit.write(folder, MANY)
    repo = isokit.make_repo(tmp_path / "repo", backend)
    proc = subprocess.Popen([durability_exe(), "run", str(folder / "wf.py"), "--run-id", "m1",
                             "--worktree", str(repo)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        # The first merged file in the shared tree: the merge is writing.
        wait_for(lambda: proc.poll() is not None or _written(repo) > 0, timeout=120,
                 interval=0.001)
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -9, err
    assert _written(repo) < FILES, "killed before the merge had written everything"

    done = cli("resume", "m1")
    assert done.returncode == 0, done.stderr
    names = sorted(n for n in os.listdir(repo) if n.startswith("f"))
    assert names == [f"f{i:04d}.txt" for i in range(FILES)]
    assert all((repo / n).read_text() == f"file {int(n[1:5])}\n" * 20 for n in names)
    assert [ln["attempt"] for ln in isokit.side(folder)] == [1, 2]
    with Runs(state_database()) as runs:
        assert [(o["node_id"], o["attempt"]) for o in runs.outputs("m1")] == [("many", 2)]
