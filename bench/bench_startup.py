"""Start-up benchmark: what a ``durability`` command costs before it does its work.

Times, as whole processes (spawn to exit) interleaved per repetition so every
column sees the same machine state:

* ``python -c pass`` with the interpreter the command runs under (the floor
  any Python command pays);
* ``durability --version`` (the group alone: no command family is imported);
* ``durability log`` in a small colocated jj repository (20 files) with three
  checkpoints (its own family, the state store and the timeline);

and prints each one's median and p90 wall time, its median CPU time, and its
ratio to ``python -c pass``: of the medians, and the median of the ratios
taken repetition by repetition (which a drifting machine moves less).

Usage: ``make bench`` runs it after the capture benchmark, or
``.venv/bin/python bench/bench_startup.py --reps 30``;
``--durability PATH`` times another installed ``durability`` (another
checkout's ``.venv/bin/durability``); given twice, both are timed in the same
run against the same floor (before and after a change).  Not a test: it
asserts nothing about speed, but it stops if a command fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchkit import Bench, Samples, find_tool, timed

RESULTS = Path(__file__).resolve().parent / "results"
FLOOR = "python -c pass"
RUN = "bench-startup"


def prepare(bench: Bench, durability: str) -> Path:
    """A colocated jj repository of 20 files with three checkpoints of one run."""
    repo, _ = bench.build_repo(20)
    for _ in range(3):
        bench.edit_one(repo, 20)
        timed([durability, "snapshot", str(repo), "--run", RUN, "--node", "n", "--json"],
              env=bench.env, cwd=repo)
    _, done = timed([durability, "log", "--json"], env=bench.env, cwd=repo)
    entries = json.loads(done.stdout)
    if len(entries) < 3:
        sys.exit(f"bench: durability log listed {len(entries)} entries, expected 3")
    return repo


def measure(bench: Bench, commands: list[str], repo: Path, reps: int) -> dict[str, Samples]:
    """Every command's start-up and the floor, in turn, ``reps`` times.  With
    several ``durability`` commands (two checkouts), each is labelled by its
    place in the list: ``[1] durability log``, ``[2] durability log``."""
    python = _python_of(commands[0])
    runs: dict[str, tuple[list[str], Path | None]] = {FLOOR: ([python, "-c", "pass"], None)}
    for i, durability in enumerate(commands, 1):
        tag = f"[{i}] " if len(commands) > 1 else ""
        runs[f"{tag}durability --version"] = ([durability, "--version"], None)
        runs[f"{tag}durability log"] = ([durability, "log"], repo)
    out = {name: Samples(name) for name in runs}
    for argv, cwd in runs.values():  # one warm-up each: page cache, .pyc files
        timed(argv, env=bench.env, cwd=cwd)
    for _ in range(reps):
        for name, (argv, cwd) in runs.items():
            out[name].add(*_timed_in(argv, bench.env, cwd))
    return out


def _timed_in(argv: list[str], env: dict[str, str], cwd: Path | None) -> tuple[float, float]:
    """As ``benchkit.timed_cpu``, in folder ``cwd``: (wall seconds, CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, _ = timed(argv, env=env, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _python_of(durability: str) -> str:
    """The interpreter of the ``durability`` script (its ``#!`` line)."""
    with open(durability, "rb") as f:
        first = f.readline().decode().strip()
    if first.startswith("#!") and os.access(first[2:].split()[0], os.X_OK):
        return first[2:].split()[0]
    return sys.executable


def report(results: dict[str, Samples], info: dict[str, Any], command: str) -> None:
    floor = results[FLOOR]
    print(f"\n{command}\nmachine: {info}\n")
    print(f"{'':28} {'median / p90 ms':>17} {'cpu ms':>8} {'x floor':>8} {'paired x':>9}")
    for name, s in results.items():
        ratio = s.median / floor.median
        paired = statistics.median(a / b for a, b in zip(s.ms, floor.ms, strict=True))
        print(f"{name:28} {s.cell():>17} {s.cpu_median:8.1f} {ratio:8.2f} {paired:9.2f}")
    print("\nabove the floor (median): "
          + ", ".join(f"{name} +{s.median - floor.median:.1f} ms"
                      for name, s in results.items() if name != FLOOR))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--reps", type=int, default=20,
                        help="repetitions of each command (default: %(default)s)")
    parser.add_argument("--durability", action="append", default=None, metavar="PATH",
                        help="a durability command to time (default: the one on PATH); "
                             "give it twice to compare two checkouts in one run")
    parser.add_argument("--no-json", action="store_true",
                        help=f"do not write a JSON copy to {RESULTS}")
    args = parser.parse_args(argv)
    command = " ".join(["bench/bench_startup.py", *(sys.argv[1:] if argv is None else argv)])
    commands = args.durability or [find_tool("durability")]
    root = Path(tempfile.mkdtemp(prefix="durability-bench-")).resolve()
    try:
        bench = Bench(root)
        info = {"nproc": os.cpu_count(), "python": platform.python_version(),
                "durability": commands,
                "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}
        repo = prepare(bench, commands[0])
        results = measure(bench, commands, repo, args.reps)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    info["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    report(results, info, command)
    if not args.no_json:
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / time.strftime("startup-%Y%m%d-%H%M%S.json")
        out.write_text(json.dumps({"command": command, "machine": info,
                                   "results": {k: v.to_json() for k, v in results.items()}},
                                  indent=2))
        print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
