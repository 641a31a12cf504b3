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

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("git", "jj"), default="git")
    parser.add_argument("--files", type=int, default=5000)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-preview-"))
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
    from durability.capture.restore import preview, restore
    from durability.capture.snapshot import snapshot_now
    from durability.config import Settings
    from engine import AttemptKey

    wt = base / "wt"
    if backend == "git":
        subprocess.run(["git", "init", "-q", str(wt)], check=True)
    else:
        subprocess.run([find_jj().path, "git", "init", "--colocate", str(wt)], check=True,
                       capture_output=True)
    wt = wt.resolve()
    settings, key = Settings.from_env(), AttemptKey("bench", "n", 0, 1)

    def fill(version: str) -> int:
        for i in range(files):
            folder = wt / f"d{i % 200:03d}"
            folder.mkdir(exist_ok=True)
            (folder / f"f{i:06d}.txt").write_text(f"{version} {i}\n")
        done = snapshot_now(settings, key=key, path=wt, request_id=str(uuid.uuid4()))
        assert done.seq is not None, done
        return done.seq

    seqs = [fill("one"), fill("two")]
    steps = [0]

    def counted(done: int, total: int) -> None:
        steps[0] = done

    def timed(label: str, call: Callable[[int], object]) -> None:
        times = []
        for i in range(4):
            start = time.perf_counter()
            call(seqs[i % 2])
            times.append(time.perf_counter() - start)
        print(f"{backend} {files} files, {label}:", _fmt(times[1:]))

    common = {"run_id": "bench", "node_id": "n"}
    timed("dry run", lambda s: preview(settings, seq=s, **common))
    timed("restore", lambda s: restore(settings, seq=s, **common))
    timed("restore + progress", lambda s: restore(settings, seq=s, progress=counted, **common))
    # Alternate the whole tree back so each --path restore has its folder to write.
    timed("restore --path d000", lambda s: restore(settings, seq=s, paths=["d000"], **common))
    assert steps[0] == files


def _fmt(times: list[float]) -> str:
    return " ".join(f"{t:.2f}" for t in times) + f" s (median {statistics.median(times):.2f} s)"


if __name__ == "__main__":
    main()
