"""Where a re-run starts (docs/how-to/runs.md, "Where a re-run starts"), against
real processes killed with SIGKILL, on jj and plain git worktrees.

The tasks kill their own process (``os.kill(os.getpid(), SIGKILL)``) at the
exact point under test, so a kill never lands a moment early or late: no
handler runs, nothing is flushed, exactly as a ``kill -9`` from outside.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from durability.runs.run_rows import Runs
from tests.helpers import cli, make_git_repo, make_jj_repo, state_database

HEADER = """\
from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.runs.run_rows import Runs
from durability.runs.workflow import Workflow

SIDE = Path(__file__).with_name("side.log")


def log(*parts):
    with SIDE.open("a") as f:
        f.write(" ".join(str(p) for p in parts) + "\\n")
        f.flush()
        os.fsync(f.fileno())


def checkpoint(ctx, label):
    # What an agent's hook does after a tool call: a checkpoint of this attempt.
    snapshot_now(Settings.from_env(ctx.env), key=ctx.key, path=Path(ctx.worktree),
                 source="wrap", request_id=str(uuid.uuid4()), label=label)


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def files(ctx):
    return ",".join(sorted(p.name for p in Path(ctx.worktree).iterdir()
                           if p.is_file() and p.name.endswith(".txt"))) or "-"
"""

# fast and slow share the worktree (refused at load unless the workflow
# accepts it: it does).  slow checkpoints first; fast then writes fast.txt
# and finishes; once fast's output is on record, slow's first attempt writes
# a stray file and is killed.
PARALLEL = HEADER + """
workflow = Workflow("parallel", max_parallel=2, shared_worktree_ok=True)


def side_has(line):
    return SIDE.exists() and line in SIDE.read_text().splitlines()


@workflow.task()
def fast(ctx):
    deadline = time.monotonic() + 60
    while not side_has("slow checkpointed 1") and time.monotonic() < deadline:
        time.sleep(0.02)
    Path(ctx.worktree, "fast.txt").write_text("fast\\n")
    log("fast done", ctx.attempt)
    return {"fast": True}


@workflow.task()
def slow(ctx):
    log("slow start", ctx.attempt, files(ctx))
    Path(ctx.worktree, "slow.txt").write_text(f"slow {ctx.attempt}\\n")
    checkpoint(ctx, "slow wrote")
    log("slow checkpointed", ctx.attempt)
    if ctx.attempt == 1:
        runs = Runs(Settings.from_env(ctx.env).database)
        deadline = time.monotonic() + 60
        while not any(o["node_id"] == "fast" for o in runs.outputs(ctx.run_id)):
            assert time.monotonic() < deadline, "fast never finished"
            time.sleep(0.02)
        Path(ctx.worktree, "stray.txt").write_text("never checkpointed\\n")
        die()
    return {"slow": True}
"""

# One task killed twice: after its first checkpoint, then (attempt 2) right
# after a stray write, before anything checkpointed it.
DOUBLE = HEADER + """
workflow = Workflow("double")


@workflow.task()
def solo(ctx):
    log("start", ctx.attempt, files(ctx))
    Path(ctx.worktree, f"a{ctx.attempt}.txt").write_text("work\\n")
    if ctx.attempt == 1:
        checkpoint(ctx, "a1")
        die()
    if ctx.attempt == 2:
        Path(ctx.worktree, "stray.txt").write_text("never checkpointed\\n")
        die()
    return {"done": ctx.attempt}
"""

# A deterministic task appending to a journal in the worktree, killed after
# its checkpoint on attempt 1.
JOURNAL = HEADER + """
workflow = Workflow("journal")


@workflow.task(on_resume=ON_RESUME)
def write_journal(ctx):
    with Path(ctx.worktree, "journal.txt").open("a") as f:
        f.write(f"attempt {ctx.attempt}\\n")
    checkpoint(ctx, "journal")
    if ctx.attempt == 1:
        die()
    return {"lines": Path(ctx.worktree, "journal.txt").read_text().count("\\n")}
"""


def _repo(tmp_path: Path, backend: str) -> Path:
    if backend == "jj":
        repo = make_jj_repo(tmp_path / "repo")
        (repo / "README.md").write_text("hello\n")
        return repo
    return make_git_repo(tmp_path / "repo")


def _workflow(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "wf"
    folder.mkdir()
    path = folder / "wf.py"
    path.write_text(textwrap.dedent(text))
    return path


def _side(path: Path) -> list[str]:
    side = path.with_name("side.log")
    return side.read_text().splitlines() if side.exists() else []


def _killed(path: Path, repo: Path, run_id: str) -> None:
    done = cli("run", str(path), "--run-id", run_id, "--worktree", str(repo))
    assert done.returncode == -9, (done.returncode, done.stdout, done.stderr)


def _state_db(tmp_path: Path) -> Runs:
    return Runs(state_database())


@pytest.mark.parametrize("backend", ["jj", "git"])
def test_a_finished_parallel_task_keeps_its_files_when_the_other_is_resumed(
        tmp_path: Path, backend: str) -> None:
    repo = _repo(tmp_path, backend)
    path = _workflow(tmp_path, PARALLEL)
    _killed(path, repo, "par")
    assert (repo / "fast.txt").exists() and (repo / "stray.txt").exists()

    done = cli("resume", "par")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "run par finished"
    side = _side(path)
    assert side.count("fast done 1") == 1 and not any(ln.startswith("fast done 2")
                                                      for ln in side)
    # slow's second attempt started on fast's finished work, without the
    # stray write of its killed first attempt.
    assert "slow start 2 fast.txt,slow.txt" in side, side
    assert (repo / "fast.txt").read_text() == "fast\n"
    assert (repo / "slow.txt").read_text() == "slow 2\n"
    assert not (repo / "stray.txt").exists()
    with _state_db(tmp_path) as runs:
        states = {(a.node_id, a.attempt): a.state for a in runs.attempts("par")}
        restores = [e for e in runs.events("par") if e.kind == "restore"]
    assert states == {("fast", 1): "succeeded", ("slow", 1): "abandoned",
                      ("slow", 2): "succeeded"}
    assert len(restores) == 1 and restores[0].detail is not None
    assert restores[0].detail["reason"] == "newest"


@pytest.mark.parametrize("backend", ["jj", "git"])
def test_a_second_crash_of_the_same_task_is_restored_too(tmp_path: Path, backend: str) -> None:
    repo = _repo(tmp_path, backend)
    path = _workflow(tmp_path, DOUBLE)
    _killed(path, repo, "dbl")
    again = cli("resume", "dbl")
    assert again.returncode == -9, again.stderr
    assert (repo / "stray.txt").exists()

    done = cli("resume", "dbl")
    assert done.returncode == 0, done.stderr
    side = _side(path)
    # Attempt 3 starts from attempt 1's checkpoint (the task's floor): what
    # attempt 2 wrote before it was killed (a2.txt, stray.txt) is undone.
    assert side == ["start 1 -", "start 2 a1.txt", "start 3 a1.txt"], side
    assert not (repo / "stray.txt").exists()
    assert sorted(p.name for p in repo.glob("*.txt")) == ["a1.txt", "a3.txt"]


@pytest.mark.parametrize(("on_resume", "journal"), [
    ("continue", "attempt 1\nattempt 2\n"),
    ("clean", "attempt 2\n"),
])
def test_continue_keeps_the_checkpointed_work_and_clean_starts_over(
        tmp_path: Path, on_resume: str, journal: str) -> None:
    repo = _repo(tmp_path, "jj")
    path = _workflow(tmp_path, JOURNAL.replace("ON_RESUME", repr(on_resume)))
    _killed(path, repo, "jr")
    assert (repo / "journal.txt").read_text() == "attempt 1\n"

    done = cli("resume", "jr")
    assert done.returncode == 0, done.stderr
    assert (repo / "journal.txt").read_text() == journal
    with _state_db(tmp_path) as runs:
        restore = next(e for e in runs.events("jr") if e.kind == "restore")
    assert restore.detail is not None
    assert restore.detail["reason"] == ("first-start" if on_resume == "clean" else "newest")
