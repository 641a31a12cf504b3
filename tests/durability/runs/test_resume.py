"""The resume contract (docs/how-to/runs.md) against real processes killed with SIGKILL at random
(seeded) points of a four-task workflow writing to a real jj worktree."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pytest

from durability.config import Settings
from durability.runs.run_rows import Runs
from durability.store import AttemptKey
from tests.durability.runs import wfkit
from tests.helpers import cli, durability_exe, make_jj_repo, wait_for

NODES = ["t1", "t2", "t3", "t4"]


def _setup(tmp_path: Path, name: str) -> tuple[Path, Path]:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "wf.py").write_text(wfkit.CHAIN)
    repo = make_jj_repo(folder / "repo")
    (repo / "README.md").write_text("hello\n")
    return folder, repo


def _runs(tmp_path: Path) -> Runs:
    # The store the CLI uses: state.db under the test's DURABILITY_HOME, or
    # PostgreSQL when the suite runs on it (tests/pg.py).
    return Runs(Settings.from_env().database)


def _outputs(tmp_path: Path, run_id: str) -> list[tuple[str, int, object]]:
    with _runs(tmp_path) as runs:
        return [(o["node_id"], o["iteration"], o["output"]) for o in runs.outputs(run_id)]


def _start_and_kill(folder: Path, repo: Path, run_id: str, rng: random.Random) -> None:
    """Start the run, wait for a seeded event of a seeded task, wait a seeded
    moment more, then SIGKILL it."""
    event = rng.choice(["start", "checkpointed", "done"])
    node = rng.choice(NODES[:3])
    delay = rng.uniform(0, 0.12)
    proc = subprocess.Popen([durability_exe(), "run", str(folder / "wf.py"), "--run-id", run_id,
                             "--worktree", str(repo)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        wait_for(lambda: [event, node] in [ln[:2] for ln in wfkit.side_lines(folder)]
                 or proc.poll() is not None, timeout=60)
        time.sleep(delay)
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == -9, f"the run ended before it was killed: {err!r}"


def _baseline(tmp_path: Path) -> tuple[list[tuple[str, int, object]], dict[str, str]]:
    folder, repo = _setup(tmp_path, "baseline")
    done = cli("run", str(folder / "wf.py"), "--run-id", "base", "--worktree", str(repo))
    assert done.returncode == 0, done.stderr
    return _outputs(tmp_path, "base"), _files(repo)


def _files(repo: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(repo.iterdir()) if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 29])
def test_sigkill_then_resume_never_reruns_completed_tasks(tmp_path: Path, seed: int) -> None:
    base_outputs, base_files = _baseline(tmp_path)
    folder, repo = _setup(tmp_path, "killed")
    _start_and_kill(folder, repo, "r1", random.Random(seed))

    with _runs(tmp_path) as runs:
        completed = {o["node_id"] for o in runs.outputs("r1")}
        interrupted = [a for a in runs.attempts("r1") if a.state == "running"]
    partial_left = sorted(p.name for p in repo.glob("*.partial"))
    # An attempt killed between its row and its function's first line never
    # started: what the contract says is that the resume runs it once more.
    started = {a.node_id: wfkit.starts(folder, a.node_id) for a in interrupted}

    done = cli("resume", "r1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "run r1 finished"

    for node in completed:
        assert wfkit.starts(folder, node) == 1, f"{node} completed before the kill, ran again"
    for attempt in interrupted:
        assert wfkit.starts(folder, attempt.node_id) == started[attempt.node_id] + 1
    assert _outputs(tmp_path, "r1") == base_outputs
    assert _files(repo) == base_files
    # Every attempt started on a tree without another attempt's leftovers:
    # the interrupted one's .partial file was undone by the restore.
    assert all(ln[3] == "-" for ln in wfkit.side_lines(folder) if ln[0] == "start")
    with _runs(tmp_path) as runs:
        states = {(a.node_id, a.attempt): a.state for a in runs.attempts("r1")}
        checkpoints = runs.checkpoints("r1")
    for attempt in interrupted:
        assert states[(attempt.node_id, attempt.attempt)] == "abandoned"
        assert states[(attempt.node_id, attempt.attempt + 1)] == "succeeded"
        key = AttemptKey(attempt.run_id, attempt.node_id, attempt.iteration, attempt.attempt)
        own = [c for c in checkpoints if c.key == key]
        if any(c.source == "wrap" for c in own):
            # Restored to its last checkpoint, with a pre-restore safety checkpoint
            # holding whatever the kill left (the .partial file if it was there).
            # Killed after .partial was removed but before the output was
            # recorded, the tree equals that checkpoint and the pre-restore
            # capture dedups to it (contract 3, docs/DESIGN.md): no row, nothing to undo.
            assert own[-1].source == "pre-restore" or not partial_left
    if partial_left:
        assert interrupted, "a .partial file can only be left by an interrupted attempt"


@pytest.mark.slow
def test_two_manual_resumes_race_one_wins_the_other_is_silent(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path, "race")
    _start_and_kill(folder, repo, "r2", random.Random(5))
    procs = [subprocess.Popen([durability_exe(), "resume", "r2"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = sorted((p.wait(120), *p.communicate(timeout=30)) for p in procs)
    assert [r[0] for r in results] == [0, 75], results
    assert results[0][1].strip() == "run r2 finished"
    assert results[1][1:] == ("", ""), "the loser must say nothing"
    for node in NODES:
        assert wfkit.starts(folder, node) <= 2
    # At most one re-run, never a double run: the killed task's, unless the
    # kill landed between two tasks (a seeded moment after a task's end is
    # later than the next task's start on one machine, earlier on a loaded
    # one), when nothing is re-run.
    assert sum(wfkit.starts(folder, n) for n in NODES) in (len(NODES), len(NODES) + 1)


def test_interrupted_attempt_is_restored_to_its_last_checkpoint(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path, "restore")
    proc = subprocess.Popen([durability_exe(), "run", str(folder / "wf.py"), "--run-id", "r3",
                             "--worktree", str(repo)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (repo / "t2.partial").exists() or proc.poll() is not None, timeout=60)
    finally:
        proc.kill()
        proc.wait(30)
    assert (repo / "t2.partial").exists(), "killed while t2's uncheckpointed file existed"

    done = cli("resume", "r3")
    assert done.returncode == 0, done.stderr
    assert ["start", "t2", "2", "-"] in wfkit.side_lines(folder)
    with _runs(tmp_path) as runs:
        first = [c for c in runs.checkpoints("r3", "t2") if c.attempt == 1]
    # The engine's own start checkpoint, then the task's, then the undo point.
    assert [c.source for c in first] == ["attempt", "wrap", "pre-restore"]
    assert first[-2].commit_id != first[-1].commit_id  # the undo point holds the .partial file
    assert not (repo / "t2.partial").exists()


def test_a_killed_owner_left_unreaped_counts_as_gone() -> None:
    """In a container whose init does not reap, a SIGKILLed owner stays a
    zombie; its run must still be resumable without --force."""
    from durability.runs.resume import pid_alive

    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert pid_alive(proc.pid)
        proc.kill()  # not waited for: a zombie until reaped below
        wait_for(lambda: Path(f"/proc/{proc.pid}/stat").read_text()
                 .rsplit(")", 1)[1].split()[0] == "Z")
        assert not pid_alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()
