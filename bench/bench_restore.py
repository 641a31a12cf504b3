"""Restore benchmark (issue 8): what a whole restore of many changed files costs.

Builds a worktree of N small files (200 folders), captures it twice with every
file's content changed in between, then times four restores alternating the
two checkpoints: ``durability.capture.restore.restore`` whole (pre-restore capture,
the confined writer, the verification).  With ``--backend jj`` it also times
``jj restore --from`` between the same two commits, jj's own checkout, for
comparison.

Usage: ``.venv/bin/python bench/bench_restore.py --backend git --files 20000``.
Not a test: it asserts nothing about speed (a restore that fails stops it).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from restorekit import fmt, main, two_checkpoints


def run(backend: str, files: int, base: Path) -> None:
    from durability.capture.restore import find_checkpoint, restore
    from engine import Store

    bench = two_checkpoints(backend, files, base)
    settings, seqs, wt, jj = bench.settings, bench.seqs, bench.worktree, bench.jj
    times = []
    for i in range(4):
        start = time.perf_counter()
        restore(settings, run_id="bench", node_id="n", seq=seqs[i % 2])
        times.append(time.perf_counter() - start)
    print(f"{backend} {files} files, durability restore:", fmt(times))
    if backend == "jj":
        with Store(settings.database) as store:
            commits = [find_checkpoint(store, run_id="bench", node_id="n", seq=s).commit_id
                       for s in seqs]
        times = []
        for i in range(4):
            start = time.perf_counter()
            subprocess.run([jj, "-R", str(wt), "restore", "--from", commits[i % 2]], check=True,
                           capture_output=True)
            times.append(time.perf_counter() - start)
        print(f"jj {files} files, jj restore --from:", fmt(times))


if __name__ == "__main__":
    main(run, "bench-restore-")
