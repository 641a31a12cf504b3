"""What the restore benchmarks share: a private environment, a worktree of N
small files in 200 folders captured twice (every file changed in between),
and the median figure line."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class TwoCheckpoints:
    backend: str
    files: int
    worktree: Path
    settings: Any
    seqs: list[int]
    jj: str


def two_checkpoints(backend: str, files: int, base: Path) -> TwoCheckpoints:
    """Set the environment up in ``base``, build the worktree, capture it twice."""
    base.mkdir(parents=True, exist_ok=True)
    # One host id for every state folder: the id is otherwise kept in each
    # folder and cached per folder, and a restore in this process after the
    # other backend's set-up would look for its checkpoints under the other
    # folder's id (and find none).
    os.environ.update(DURABILITY_HOST_ID="bench-host",
                      DURABILITY_HOME=str(base / "state"), DURABILITY_SPOOL_DIR=str(base / "spool"),
                      DURABILITY_SOCKET=str(base / "s.sock"), JJ_CONFIG=str(base / "jj.toml"),
                      GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b.invalid",
                      GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b.invalid")
    (base / "jj.toml").write_text('[user]\nname = "b"\nemail = "b@b.invalid"\n')
    from durability.backends.jj import find_jj
    from durability.capture.snapshot import snapshot_now
    from durability.config import Settings
    from durability.store import AttemptKey

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
        assert done.seq is not None, done
        return done.seq

    return TwoCheckpoints(backend, files, wt, settings, [fill("one"), fill("two")], jj)


def fmt(times: list[float]) -> str:
    return " ".join(f"{t:.2f}" for t in times) + f" s (median {statistics.median(times):.2f} s)"


def main(run: Callable[[str, int, Path], None], prefix: str) -> None:
    """The benchmarks' command line: ``--backend git|jj --files N``, in a
    temporary folder removed at the end."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=("git", "jj"), default="git")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--cli", action="store_true",
                        help="time the installed command (bench_restore.py only)")
    parser.add_argument("--pairs", type=int, default=6,
                        help="rounds of the --cli comparison, the first dropped "
                             "(bench_restore.py only)")
    parser.add_argument("--before", metavar="DIR",
                        help="--cli: also time the package of the source tree DIR "
                             "(bench_restore.py only)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        run(args.backend, args.files, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
