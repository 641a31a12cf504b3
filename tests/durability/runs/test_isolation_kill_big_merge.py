"""kill -9 while the merge back is writing one large file into the shared
worktree: the resume merges again and writes the file whole, instead of
taking its own torn write for a change of the shared tree and failing with
WORKTREE_CONFLICT.  Real jj and git, the installed CLI, a real SIGKILL."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest

from durability.backends.jj import git_dir
from tests.durability.runs import isokit
from tests.helpers import cli, durability_exe, wait_for

SIZE = 24 * 1024 * 1024
BODY = b"0123456789abcdef" * (SIZE // 16)
#: The merge journal's refs (durability.worktree_ops.isolation.JOURNAL_PREFIX).
JOURNAL_PREFIX = "refs/durability/merging/"

BIG = f"""
workflow = Workflow("big", worktree="isolated")


@workflow.task()
def big(ctx):
    log(attempt=ctx.attempt)
    Path(ctx.worktree, "big.bin").write_bytes(b"0123456789abcdef" * ({SIZE} // 16))
    return {{"size": {SIZE}}}
"""


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _killed_mid_write(tmp_path: Path, backend: str, run_id: str) -> Path | None:
    """A run killed while the merge back writes big.bin: its shared worktree,
    or None when the kill missed the write (a loaded machine)."""
    folder = tmp_path / run_id
    isokit.write(folder, BIG)
    repo = isokit.make_repo(folder / "repo", backend)
    proc = subprocess.Popen([durability_exe(), "run", str(folder / "wf.py"), "--run-id", run_id,
                             "--worktree", str(repo)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        wait_for(lambda: proc.poll() is not None or _size(repo / "big.bin") is not None,
                 timeout=120, interval=0.0005)
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -9, err
    torn = _size(repo / "big.bin")
    return repo if torn is not None and torn < SIZE else None


def _torn(tmp_path: Path, backend: str) -> tuple[Path, str]:
    for n in range(3):
        run_id = f"b{n}"
        repo = _killed_mid_write(tmp_path, backend, run_id)
        if repo is not None:
            return repo, run_id
    raise AssertionError("three kills all missed the write of big.bin")


@pytest.mark.parametrize("backend", ["jj", "git"])
def test_kill_9_mid_write_of_a_big_merged_file_then_resume_merges(tmp_path: Path,
                                                                 backend: str) -> None:
    repo, run_id = _torn(tmp_path, backend)
    done = cli("resume", run_id)
    assert done.returncode == 0, done.stderr
    assert (repo / "big.bin").read_bytes() == BODY
    store = pygit2.Repository(str(git_dir(repo) if backend == "jj" else repo / ".git"))
    assert not [r for r in store.references if r.startswith(JOURNAL_PREFIX)]


def test_a_change_made_elsewhere_after_the_kill_is_merged_with(tmp_path: Path) -> None:
    repo, run_id = _torn(tmp_path, "git")
    (repo / "mine.txt").write_text("a person's own\n")
    done = cli("resume", run_id)
    assert done.returncode == 0, done.stderr
    assert (repo / "big.bin").read_bytes() == BODY
    assert (repo / "mine.txt").read_text() == "a person's own\n"


def test_the_torn_file_rewritten_by_someone_else_is_a_real_conflict(tmp_path: Path) -> None:
    repo, run_id = _torn(tmp_path, "git")
    (repo / "big.bin").write_text("a person's own\n")  # not part of the merged file
    done = cli("resume", run_id)
    assert done.returncode == 16 and "WORKTREE_CONFLICT" in done.stderr, done.stderr
    assert (repo / "big.bin").read_text() == "a person's own\n"
