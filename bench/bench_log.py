"""``durability log`` on a history of large files (issue 25), against
``git log --stat`` on the same commits, measured in the same run.

It builds a git worktree holding ``--big`` text files of ``--mb`` MiB each
(and a few small ones), then records ``--entries`` checkpoints through the
toolkit, each after appending a line to one of the large files (so every
checkpoint's change is a large file's).  Then, in turn (A B A B ...), it runs
the installed ``durability log -n ENTRIES`` in the worktree and ``git log
--stat -n ENTRIES`` from the newest checkpoint's commit, each a whole process
waited for with ``os.wait4``: wall time, CPU time (user + system) and peak
RSS of that process.  It prints medians and the ratio of each pair.

    .venv/bin/python bench/bench_log.py --entries 50 --mb 70 --reps 5

Not a test: it asserts nothing about speed (a failed capture or command stops it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.benchkit import find_tool

_LINE = b"0123456789 the quick brown fox jumps over the lazy dog, a line of a large file\n"


def _env(base: Path) -> dict[str, str]:
    return {**os.environ, "DURABILITY_HOME": str(base / "state"),
           "DURABILITY_SPOOL_DIR": str(base / "spool"),
           "DURABILITY_SOCKET": str(base / "no-service.sock"),
           "DURABILITY_BACKEND": "git",
           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b.invalid"}


def _build(base: Path, entries: int, big: int, mb: int) -> str:
    """The history (in a process of its own: see ``main``); the newest commit."""
    os.environ.update(_env(base))
    from durability.capture.snapshot import snapshot_now
    from durability.config import Settings
    from durability.store import AttemptKey

    wt = base / "wt"
    subprocess.run(["git", "init", "-q", str(wt)], check=True)
    wt = wt.resolve()
    chunk = _LINE * (1024 * 1024 // len(_LINE) + 1)
    for b in range(big):
        with open(wt / f"big{b}.txt", "wb") as f:
            for _ in range(mb):
                f.write(chunk[: 1024 * 1024])
    for s in range(5):
        (wt / f"small{s}.txt").write_text(f"small {s}\n")
    settings, key = Settings.from_env(), AttemptKey("bench", "n", 0, 1)
    commit = ""
    for i in range(entries + 1):
        if i:
            with open(wt / f"big{i % big}.txt", "ab") as f:
                f.write(f"entry {i}\n".encode())
        done = snapshot_now(settings, key=key, path=wt, request_id=str(uuid.uuid4()),
                            label=f"entry {i}")
        if done.seq is None:
            sys.exit(f"bench: capture {i} recorded no checkpoint: {done}")
        commit = done.commit_id or commit
    return commit


def _timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, float]:
    """Wall s, CPU s, peak RSS MiB of one whole process."""
    started = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=null, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench: {argv[0]} failed ({proc.returncode}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=50)
    parser.add_argument("--big", type=int, default=2, help="how many large files")
    parser.add_argument("--mb", type=int, default=70, help="MiB per large file")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--durability", default=find_tool("durability"),
                        help="the durability command to time")
    parser.add_argument("--build", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build is not None:
        print(_build(args.build, args.entries, args.big, args.mb))
        return 0
    base = Path(tempfile.mkdtemp(prefix="bench-log-"))
    try:
        # Built by a child: this process stays small, because a child forked
        # from it starts with its pages, and the peak RSS of the timed
        # command would count them (the captures hash 70 MiB files here).
        commit = subprocess.run(
            [sys.executable, __file__, "--build", str(base), "--entries", str(args.entries),
             "--big", str(args.big), "--mb", str(args.mb)],
            check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        wt, env = (base / "wt").resolve(), {**os.environ, **_env(base)}
        ours = [args.durability, "log", "--limit", str(args.entries)]
        git = ["git", "log", "--stat", "-n", str(args.entries), commit]
        rows: dict[str, list[tuple[float, float, float]]] = {"durability log": [],
                                                             "git log --stat": []}
        _timed(ours, wt, env)  # warm-up: the page cache and the bytecode
        _timed(git, wt, env)
        for _ in range(args.reps):
            rows["durability log"].append(_timed(ours, wt, env))
            rows["git log --stat"].append(_timed(git, wt, env))
        print(f"{args.entries} entries, {args.big} files of {args.mb} MiB, each checkpoint "
              f"changing one; load average {os.getloadavg()[0]:.1f}")
        for name, runs in rows.items():
            wall, cpu, rss = (statistics.median(r[i] for r in runs) for i in range(3))
            print(f"  {name:16} wall {wall * 1000:8.0f} ms  cpu {cpu * 1000:8.0f} ms  "
                  f"peak RSS {rss:6.1f} MiB")
        ratios = [a[0] / b[0] for a, b in zip(rows["durability log"], rows["git log --stat"],
                                               strict=True)]
        print(f"  durability / git, paired wall: median {statistics.median(ratios):.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
