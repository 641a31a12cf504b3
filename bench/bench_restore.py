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

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("git", "jj"), default="git")
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-restore-"))
    try:
        run(args.backend, args.files, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(backend: str, files: int, base: Path) -> None:
    os.environ.update(DURABILITY_HOME=str(base / "state"), DURABILITY_SPOOL_DIR=str(base / "spool"),
                      DURABILITY_SOCKET=str(base / "s.sock"), JJ_CONFIG=str(base / "jj.toml"),
                      GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b.invalid",
                      GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b.invalid")
    (base / "jj.toml").write_text('[user]\nname = "b"\nemail = "b@b.invalid"\n')
    from durability.backends.jj import find_jj
    from durability.capture.restore import find_checkpoint, restore
    from durability.capture.snapshot import snapshot_now
    from durability.config import Settings
    from engine import AttemptKey, Store

    wt = base / "wt"
    jj = find_jj().path
    if backend == "git":
        subprocess.run(["git", "init", "-q", str(wt)], check=True)
    else:
        subprocess.run([jj, "git", "init", "--colocate", str(wt)], check=True, capture_output=True)
    wt = wt.resolve()
    settings, key = Settings.from_env(), AttemptKey("bench", "n", 0, 1)

    def fill(version: str) -> int:
        for i in range(files):
            folder = wt / f"d{i % 200:03d}"
            folder.mkdir(exist_ok=True)
            (folder / f"f{i:06d}.txt").write_text(f"{version} {i}\n")
        done = snapshot_now(settings, key=key, path=wt, request_id=str(uuid.uuid4()))
        return int(done.seq or 0)

    seqs = [fill("one"), fill("two")]
    times = []
    for i in range(4):
        start = time.perf_counter()
        restore(settings, run_id="bench", node_id="n", seq=seqs[i % 2])
        times.append(time.perf_counter() - start)
    print(f"{backend} {files} files, durability restore:", _fmt(times))
    if backend == "jj":
        with Store(settings.db_path) as store:
            commits = [find_checkpoint(store, run_id="bench", node_id="n", seq=s).commit_id
                       for s in seqs]
        times = []
        for i in range(4):
            start = time.perf_counter()
            subprocess.run([jj, "-R", str(wt), "restore", "--from", commits[i % 2]], check=True,
                           capture_output=True)
            times.append(time.perf_counter() - start)
        print(f"jj {files} files, jj restore --from:", _fmt(times))


def _fmt(times: list[float]) -> str:
    return " ".join(f"{t:.2f}" for t in times) + f" s (median {statistics.median(times):.2f} s)"


if __name__ == "__main__":
    main()
