"""Git-backend benchmark (issue 4): what a capture of a plain git worktree costs.

For 1,000, 10,000 and 100,000 small files (100 per folder) in one worktree,
each measurement after its own one-file edit, interleaved per repetition so
every column sees the same machine state:

* raw ``jj util snapshot`` (the jj backend's floor, on the same tree);
* ``git add -A`` + ``git write-tree`` with a private index (two processes);
* the git backend, full scan, repository and private index kept open (the
  service's case): stage, write the tree, commit, move the attempt's ref;
* the git backend, cold: the repository and index opened first (the
  in-process fallback of a hook or the CLI);
* the git backend, watcher-informed: only the edited path restaged.

Target: a watcher-informed capture after a one-file change in the
100,000-file tree at least 10 times faster than ``jj util snapshot``.

Usage: ``.venv/bin/python bench/bench_git.py [--sizes 1000,10000 --reps 10]``.
It stops if a capture records the wrong tree.  Not a test: it asserts nothing
about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchkit import Bench, Samples, timed

from durability.backends import Stamp
from durability.backends.git import GitBackend, forget, worktree_index
from durability.store import AttemptKey

RESULTS = Path(__file__).resolve().parent / "results"
COLUMNS = ("jj util snapshot", "git add -A + write-tree", "git backend, full scan",
           "git backend, cold open", "git backend, watcher-informed")
KEY = AttemptKey("bench-git", "node", 0, 1)


def _stamp(seq: int) -> Stamp:
    return Stamp(key=KEY, source="watch", request_ids=(str(uuid.uuid4()),), seq=seq)


def _capture(repo: Path, seq: int, changed: set[str] | None) -> tuple[float, str]:
    backend = GitBackend()
    started = time.perf_counter()
    snap = backend.snapshot(repo, [_stamp(seq)], changed_paths=changed)
    return time.perf_counter() - started, snap.commit_id


def measure(bench: Bench, n_files: int, reps: int) -> dict[str, Any]:
    started = time.perf_counter()
    repo, jj_first = bench.build_repo(n_files)
    genv = bench.git_env(n_files)
    git_first = timed([bench.git, "-C", str(repo), "add", "-A"], env=genv)[0]
    first, _ = _capture(repo, 0, None)
    print(f"  {n_files:>7} files: built in {time.perf_counter() - started:.1f}s (first jj "
          f"snapshot {jj_first:.2f}s, first git add -A {git_first:.2f}s, first git-backend "
          f"capture {first:.2f}s)", file=sys.stderr)
    cols = {name: Samples(name) for name in COLUMNS}
    for rep in range(reps):
        bench.edit_one(repo, n_files)
        cols[COLUMNS[0]].add(timed(bench.jj_argv(repo, "util", "snapshot"), env=bench.env,
                                   cwd=repo)[0])
        bench.edit_one(repo, n_files)
        add_s = timed([bench.git, "-C", str(repo), "add", "-A"], env=genv)[0]
        cols[COLUMNS[1]].add(add_s + timed([bench.git, "-C", str(repo), "write-tree"],
                                           env=genv)[0])
        bench.edit_one(repo, n_files)
        cols[COLUMNS[2]].add(_capture(repo, 4 * rep + 1, None)[0])
        bench.edit_one(repo, n_files)
        forget(repo)
        cols[COLUMNS[3]].add(_capture(repo, 4 * rep + 2, None)[0])
        edited = bench.edit_one(repo, n_files)
        seconds, informed = _capture(repo, 4 * rep + 3, {str(edited.relative_to(repo))})
        if worktree_index(repo).last_scan != "paths":
            sys.exit("bench: the watcher-informed capture fell back to a full scan")
        cols[COLUMNS[4]].add(seconds)
        _check(repo, informed, 4 * rep + 4)
    return {"files": n_files, "columns": cols}


def _check(repo: Path, informed: str, seq: int) -> None:
    """A full scan right after must find nothing new (same commit: dedup)."""
    _, full = _capture(repo, seq, None)
    if full != informed:
        sys.exit(f"bench: informed capture {informed} differs from a full scan {full}")


def print_report(command: str, results: list[dict[str, Any]]) -> None:
    print(f"\n$ {command}")
    print(f"{platform.platform()}, {os.cpu_count()} cpus, Python {platform.python_version()}")
    print("median / p90 ms after a one-file edit\n")
    print(f"| {'files':>7} | " + " | ".join(f"{c:>29}" for c in COLUMNS) + " | jj / informed |")
    print("|" + "---------|" * 1 + "------------------------------:|" * len(COLUMNS) + "---:|")
    for r in results:
        cols = r["columns"]
        ratio = cols[COLUMNS[0]].median / cols[COLUMNS[4]].median
        cells = " | ".join(f"{cols[c].cell():>29}" for c in COLUMNS)
        print(f"| {r['files']:>7} | {cells} | {ratio:5.1f}x |")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="comma-separated file counts (default: 1000,10000,100000)")
    parser.add_argument("--reps", type=int, default=10, help="repetitions per size")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="scratch folder (default: a new temporary folder)")
    parser.add_argument("--no-json", action="store_true",
                        help="do not write bench/results/bench_git.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    command = "python bench/bench_git.py " + " ".join(sys.argv[1:] if argv is None else argv)
    root = Path(args.workdir or tempfile.mkdtemp(prefix="bench-git-"))
    root.mkdir(parents=True, exist_ok=True)
    bench = Bench(root)
    os.environ.update({k: v for k, v in bench.env.items() if k.startswith("GIT_CONFIG")})
    results = [measure(bench, n, args.reps) for n in sizes]
    print_report(command.strip(), results)
    if not args.no_json:
        RESULTS.mkdir(exist_ok=True)
        data = {"command": command.strip(), "platform": platform.platform(),
                "results": [{"files": r["files"],
                             **{c: r["columns"][c].to_json() for c in COLUMNS}}
                            for r in results]}
        (RESULTS / "bench_git.json").write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
