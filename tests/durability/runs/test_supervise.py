"""Two ``durability supervise`` processes racing on one stale run: exactly
one claims and resumes it in a detached child, the other says nothing."""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pytest

from durability.config import Settings
from durability.runs.run_rows import Runs
from tests.durability.runs import wfkit
from tests.durability.runs.test_resume import NODES, _setup, _start_and_kill
from tests.helpers import durability_exe, wait_for


@pytest.mark.slow
def test_two_supervisors_one_winner_the_other_silent(tmp_path: Path) -> None:
    folder, repo = _setup(tmp_path, "sup")
    _start_and_kill(folder, repo, "s1", random.Random(3))
    # Let the dead owner's heartbeat go stale (threshold 2s below).
    db = Settings.from_env().database
    with Runs(db) as runs:
        beat = runs.get_run("s1").heartbeat_at_ms or 0
    wait_for(lambda: time.time() * 1000 - beat > 2_500, timeout=10, interval=0.1)

    procs = [subprocess.Popen([durability_exe(), "supervise", "--once", "--stale-after", "2s",
                               "--id", f"sup{i}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    results = sorted((p.wait(60), *p.communicate(timeout=30)) for p in procs)
    assert [r[0] for r in results] == [0, 0]
    said = sorted(r[1].strip() for r in results)
    assert said == ["", "resumed s1"], results
    loser = next(r for r in results if not r[1].strip())
    assert loser[2] == "", "the losing supervisor must say nothing"

    def finished() -> bool:
        with Runs(db) as runs:
            row = runs.get_run("s1")
        return row.state == "finished" and row.owner is None

    wait_for(finished, timeout=60, interval=0.1)
    with Runs(db) as runs:
        row = runs.get_run("s1")
    assert row.owner is None and row.state == "finished"
    assert sum(wfkit.starts(folder, n) for n in NODES) == 5  # one re-run, nothing twice more
    assert all(ln[3] == "-" for ln in wfkit.side_lines(folder) if ln[0] == "start")
    log = tmp_path / "state" / "runs" / "s1.log"
    assert "run s1 finished" in log.read_text()
