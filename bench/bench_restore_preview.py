"""Restore preview and partial restore benchmark (issue 11).

Builds a worktree of N small files (200 folders), captures it twice with every
file's content changed in between, then times, alternating the two
checkpoints: a dry run (``preview``), a whole restore, a whole restore with a
progress callback (what the CLI's bar costs when it draws nothing), and a
``--path`` restore of one folder (N/200 files).  Each is the library call
whole, pre-restore capture and verification included; median of three.

Usage: ``.venv/bin/python bench/bench_restore_preview.py --backend git --files 20000``.
Not a test: it asserts nothing about speed (a restore that fails stops it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from restorekit import fmt, main, two_checkpoints


def run(backend: str, files: int, base: Path) -> None:
    from durability.restore.apply import preview, restore

    bench = two_checkpoints(backend, files, base)
    settings, seqs = bench.settings, bench.seqs
    steps = [0]

    def counted(done: int, total: int) -> None:
        steps[0] = done

    def timed(label: str, call: Callable[[int], object]) -> None:
        times = []
        for i in range(4):
            start = time.perf_counter()
            call(seqs[i % 2])
            times.append(time.perf_counter() - start)
        print(f"{backend} {files} files, {label}:", fmt(times[1:]))

    common = {"run_id": "bench", "node_id": "n"}
    timed("dry run", lambda s: preview(settings, seq=s, **common))
    timed("restore", lambda s: restore(settings, seq=s, **common))
    timed("restore + progress", lambda s: restore(settings, seq=s, progress=counted, **common))
    # Alternate the whole tree back so each --path restore has its folder to write.
    timed("restore --path d000", lambda s: restore(settings, seq=s, paths=["d000"], **common))
    assert steps[0] == files


if __name__ == "__main__":
    main(run, "bench-preview-")
