"""``durability gc`` killed with SIGKILL at moments spread over its run
(rows, chain rewrites, the op-log trim, the object gc), again and again on
the same repository: after every kill each checkpoint row left still holds
its content, a capture of every attempt still works, and a gc run to the end
leaves no ``gc-pending`` ref behind."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from durability.backends import prune as backend_prune
from durability.config import Settings
from engine import AttemptKey
from tests.durability.retention.gckit import DAY, HOUR, T0, Recorder, file_at, make_repo, store_git
from tests.helpers import cli, durability_exe

EXPIRE = ("[retention]\nkeep_all_days = 0\nhourly_days = 0\ndaily_days = 0\n"
          "pre_restore_days = 0\njj_op_log_days = 0\nprune_grace_s = 0\n")
KEYS = [AttemptKey(f"sess-{n}", "session", 0, 1) for n in range(4)]
DELAYS_S = (0.4, 0.55, 0.7, 0.9)


def _check(rec: Recorder, wt: Path) -> int:
    rows = [c for key in KEYS for c in rec.store.checkpoints(key.run_id)]
    for c in rows:
        want = rec.content.get((AttemptKey(c.run_id, c.node_id, c.iteration, c.attempt), c.seq))
        if want is not None:
            assert file_at(wt, c.commit_id) == want, (c.seq, c.commit_id)
    return len(rows)


@pytest.mark.parametrize("kind", ["git", "jj"])
def test_gc_killed_again_and_again_loses_nothing(kind: str, tmp_path: Path,
                                                  settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt")
    rec = Recorder(settings, wt, start_ms=T0 - 3 * DAY)  # gc runs on the wall clock
    for _ in range(6):
        for key in KEYS:
            rec.capture(key=key)
        rec.clock.advance(HOUR)
    config = tmp_path / "config.toml"
    config.write_text(EXPIRE)
    env = {**os.environ, "DURABILITY_CONFIG": str(config)}
    counts = [_check(rec, wt)]
    for delay in DELAYS_S:
        gc = subprocess.Popen([durability_exe(), "gc"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if gc.poll() is None:
            os.kill(gc.pid, signal.SIGKILL)
        gc.wait(60)
        counts.append(_check(rec, wt))
        for key in KEYS:  # captures after the kill: appended, recorded, readable
            rec.capture(key=key)
        rec.clock.advance(HOUR)
        counts.append(_check(rec, wt))
    done = cli("gc", env=env)
    assert done.returncode == 0, done.stderr
    assert _check(rec, wt) == len(KEYS)  # each attempt's newest
    pending = [n for n in store_git(wt).references
               if n.startswith(backend_prune.PENDING_PREFIX)]
    assert pending == []
    print(kind, "rows after each kill and capture:", counts)
    rec.close()
