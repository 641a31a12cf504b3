"""Isolated worktree benchmark (issue 13): what an isolated task costs
beside a shared one.

Builds a worktree of N small files (200 folders), captures it once, then
times a cycle of ``DurabilityIsolation``: ``create`` (snapshot of the shared
tree, ``jj workspace add`` + ``jj restore``, or ``git worktree add``), ten
files written in the isolated tree, ``merge_back`` (two captures, the
three-way merge, the write into the shared tree, a third capture) and
``remove``.  The baseline, measured in the same run, is the bare cycle of
the version control tool checking out the same tree: ``jj workspace add -r
@`` + ``jj workspace forget`` (and deleting the folder), or ``git worktree
add`` of the same commit + ``git worktree remove``.

Usage: ``.venv/bin/python bench/bench_isolation.py --backend jj --files 5000``.
Not a test: it asserts nothing about speed (a cycle that fails stops it).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time
from pathlib import Path

from restorekit import fmt, main, two_checkpoints

ROUNDS = 4


def run(backend: str, files: int, base: Path) -> None:
    from durability.runs.isolated import TaskWorktree
    from durability.store import AttemptKey
    from durability.worktree_ops.isolation import DurabilityIsolation

    bench = two_checkpoints(backend, files, base)
    shared, isolation = bench.worktree, DurabilityIsolation(bench.settings)
    ours: list[float] = []
    for i in range(ROUNDS):
        start = time.perf_counter()
        made = isolation.create("bench", f"t{i}", 0, str(shared))
        for j in range(10):
            Path(made.path, f"new-{i}-{j}.txt").write_text(f"{i} {j}\n")
        row = TaskWorktree("bench", f"t{i}", 0, made.path, made.kind, str(shared),
                           made.base_commit, made.name, "active", 0, 0)
        isolation.merge_back(row, AttemptKey("bench", f"t{i}", 0, 1))
        isolation.remove(row)
        ours.append(time.perf_counter() - start)
    print(f"{backend} {files} files, isolated task cycle:", fmt(ours))
    bare = [_bare(backend, bench.jj, shared, base / f"bare{i}", f"bare{i}", made.base_commit)
            for i in range(ROUNDS)]
    print(f"{backend} {files} files, bare {_bare_name(backend)}:", fmt(bare))
    print(f"ratio (median): {statistics.median(ours) / statistics.median(bare):.1f}x")


def _bare_name(backend: str) -> str:
    return ("jj workspace add -r @ + forget" if backend == "jj"
            else "git worktree add + remove")


def _bare(backend: str, jj: str, shared: Path, path: Path, name: str, commit: str) -> float:
    start = time.perf_counter()
    if backend == "jj":
        _run([jj, "-R", str(shared), "--config", "git.colocate=false", "workspace", "add",
              "--name", name, "-r", "@", str(path)])
        _run([jj, "-R", str(shared), "workspace", "forget", name])
        shutil.rmtree(path)
    else:
        _run(["git", "-C", str(shared), "worktree", "add", "--detach", str(path), commit])
        _run(["git", "-C", str(shared), "worktree", "remove", "--force", str(path)])
    return time.perf_counter() - start


def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True)


if __name__ == "__main__":
    main(run, "bench-isolation-")
