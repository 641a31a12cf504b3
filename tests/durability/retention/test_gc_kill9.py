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

import filelock
import pytest

from durability.backends import history as backend_prune
from durability.config import Settings
from durability.store import AttemptKey
from tests.durability.retention.gckit import (
    DAY,
    HOUR,
    KEY,
    T0,
    Recorder,
    daily,
    file_at,
    make_repo,
    store_git,
)
from tests.helpers import durability_exe, jj_path, run_cli, wait_for

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


@pytest.mark.slow
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
    done = run_cli("gc", env=env)
    assert done.returncode == 0, done.stderr
    assert _check(rec, wt) == len(KEYS)  # each attempt's newest
    pending = [n for n in store_git(wt).references
               if n.startswith(backend_prune.PENDING_PREFIX)]
    assert pending == []
    print(kind, "rows after each kill and capture:", counts)
    rec.close()


@pytest.mark.slow
def test_a_killed_gc_leaves_its_lock_with_the_jj_gc_still_running(tmp_path: Path,
                                                                   settings: Settings) -> None:
    """jj runs in a session of its own and outlives a ``kill -9`` of gc, and
    ``jj util gc --expire=now`` prunes, through ``git gc``, what a capture
    writes meanwhile (a CI run saw a capture's new commit vanish before its
    pin).  So jj keeps gc's worktree lock while it runs: a capture waits for
    it instead of racing it."""
    wt = make_repo("jj", tmp_path / "wt")
    rec = daily(settings, wt, 3)
    started = tmp_path / "jj-gc-started"
    slow_jj = tmp_path / "jj"  # the real jj, with a pause before its gc
    slow_jj.write_text(f"""#!/bin/sh
case "$*" in *"util gc"*) : > '{started}'; sleep 3;; esac
exec '{jj_path()}' "$@"
""")
    slow_jj.chmod(0o755)
    config = tmp_path / "config.toml"
    config.write_text(EXPIRE)
    env = {**os.environ, "DURABILITY_CONFIG": str(config), "DURABILITY_JJ": str(slow_jj)}
    gc = subprocess.Popen([durability_exe(), "gc"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        wait_for(started.exists, timeout=60)
    finally:
        os.kill(gc.pid, signal.SIGKILL)
        gc.wait(60)
    lock = rec.capturer.lock(wt, 0.5)
    with pytest.raises(filelock.Timeout):  # jj, orphaned, holds it
        lock.acquire()
    with rec.capturer.lock(wt, 60):  # and lets it go when it ends
        pass
    rec.capture()  # a capture after it is recorded and readable
    newest = rec.store.checkpoints(KEY.run_id)[-1]
    assert file_at(wt, newest.commit_id) == rec.content[(KEY, newest.seq)]
    rec.close()
