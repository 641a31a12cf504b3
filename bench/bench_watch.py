"""Watcher benchmark (issue 3): what Tier 2 watching costs.

Measures, against real colocated jj repositories and an in-process service:

* event-to-checkpoint latency after a quiet period (one file written, time
  until its checkpoint row is committed), with the settle time it includes;
* CPU of the watching process while idle (every thread, over ``--idle-s``);
* CPU during a burst of ``--burst`` file writes made by another process:
  the watcher's own CPU, jj's (children), and how many checkpoints it cost;
* memory per watched worktree of ``--files`` files: the process's RSS before
  and after the watch is armed, and the inotify watches it holds.

Usage: ``.venv/bin/python bench/bench_watch.py`` (defaults: 100,000-file
worktree, 10,000-file burst) or ``--files 20000 --burst 2000`` for a quick run.
Not a test: it asserts nothing about speed, but stops if a capture fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from durability.config import Settings
from durability.service.server import Service
from durability.store import Store

RUN = "bench-watch"
RESULTS = Path(__file__).resolve().parent / "results"


def make_repo(path: Path, n_files: int, per_dir: int = 100) -> Path:
    """A colocated jj repository of ``n_files`` small files, ``per_dir`` per folder."""
    subprocess.run(["jj", "git", "init", "--colocate", str(path)], check=True,
                   capture_output=True)
    for i in range(n_files):
        folder = path / f"d{i // per_dir:05}"
        if i % per_dir == 0:
            folder.mkdir()
        (folder / f"f{i:07}.txt").write_text(f"{i}\n")
    return path


def rss_kib() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def inotify_watches() -> int:
    """Inotify watches held by this process (from /proc/self/fdinfo)."""
    count = 0
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii") as f:
                count += sum(1 for line in f if line.startswith("inotify wd:"))
        except OSError:
            continue
    return count


def rows(store: Store) -> int:
    return len(store.checkpoints(RUN))


def wait_rows(store: Store, n: int, timeout_s: float = 300) -> float:
    deadline = time.monotonic() + timeout_s
    while rows(store) < n:
        if time.monotonic() > deadline:
            sys.exit(f"no checkpoint {n} within {timeout_s}s")
        time.sleep(0.005)
    return time.monotonic()


def quiet(store: Store, quiet_s: float) -> int:
    """Wait until no checkpoint was added for ``quiet_s``; the row count."""
    last = rows(store)
    while True:
        time.sleep(quiet_s)
        now = rows(store)
        if now == last:
            return now
        last = now


def watch(svc: Service, repo: Path, settle_ms: int) -> None:
    req = json.dumps({"v": 1, "op": "watch", "run_id": RUN, "node_id": "n",
                      "worktree": str(repo.resolve()), "settle_ms": settle_ms,
                      "max_delay_ms": 60_000}).encode()
    answer = svc.handle(req)
    if not answer.get("ok"):
        sys.exit(f"watch refused: {answer}")


def latency(svc: Service, store: Store, repo: Path, reps: int, settle_ms: int) -> dict[str, Any]:
    samples = []
    for i in range(reps):
        n = quiet(store, 0.5)
        start = time.monotonic()
        (repo / f"lat{i}.txt").write_text(str(i))
        samples.append((wait_rows(store, n + 1) - start) * 1000)
    samples.sort()
    return {"settle_ms": settle_ms, "reps": reps, "median_ms": statistics.median(samples),
            "p90_ms": samples[int(len(samples) * 0.9) - 1], "max_ms": samples[-1],
            "median_over_settle_ms": statistics.median(samples) - settle_ms}


def idle_cpu(store: Store, seconds: float) -> dict[str, Any]:
    quiet(store, 0.5)
    cpu0, t0 = time.process_time(), time.monotonic()
    time.sleep(seconds)
    cpu, wall = time.process_time() - cpu0, time.monotonic() - t0
    return {"seconds": round(wall, 2), "cpu_s": round(cpu, 4), "cpu_percent": 100 * cpu / wall}


def burst(store: Store, repo: Path, n: int) -> dict[str, Any]:
    before = quiet(store, 1.0)
    children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0, t0 = time.process_time(), time.monotonic()
    writer = ("import sys, pathlib\nroot = pathlib.Path(sys.argv[1]); root.mkdir()\n"
              "for i in range(int(sys.argv[2])):\n"
              "    (root / f'b{i:06}.txt').write_text(str(i))\n")
    subprocess.run([sys.executable, "-c", writer, str(repo / "burst"), str(n)], check=True)
    written = time.monotonic()
    captured = wait_rows(store, before + 1)  # the capture of a big tree takes a while
    after = quiet(store, 3.0)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    jj_cpu = (children.ru_utime + children.ru_stime) - (children0.ru_utime + children0.ru_stime)
    return {"files": n, "write_s": round(written - t0, 3),
            "last_write_to_checkpoint_s": round(captured - written, 3),
            "watcher_cpu_s": round(time.process_time() - cpu0, 3),
            "children_cpu_s (jj, writer)": round(jj_cpu, 3),
            "checkpoints": after - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--settle-ms", type=int, default=300)
    parser.add_argument("--idle-s", type=float, default=10.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        base = Path(tmp)
        os.environ.update(DURABILITY_HOME=str(base / "state"),
                          DURABILITY_SPOOL_DIR=str(base / "spool"),
                          DURABILITY_SOCKET=str(base / "s.sock"))
        result = run(base, args)
    print(json.dumps(result, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bench_watch.json").write_text(json.dumps(result, indent=2) + "\n")


def run(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    t0 = time.monotonic()
    repo = make_repo(base / "repo", args.files)
    subprocess.run(["jj", "-R", str(repo), "util", "snapshot"], check=True, capture_output=True)
    build_s = time.monotonic() - t0
    settings = Settings.from_env()
    with Service(settings) as svc, Store(settings.database) as store:
        rss0, t1 = rss_kib(), time.monotonic()
        watch(svc, repo, args.settle_ms)
        armed_s = time.monotonic() - t1
        wait_rows(store, 1)
        quiet(store, 1.0)
        memory = {"files": args.files, "folders": args.files // 100 + 1,
                  "rss_before_kib": rss0, "rss_after_kib": rss_kib(),
                  "rss_delta_kib": rss_kib() - rss0, "inotify_watches": inotify_watches(),
                  "arm_s": round(armed_s, 3)}
        return {"build_repo_s": round(build_s, 1), "memory": memory,
                "latency": latency(svc, store, repo, args.reps, args.settle_ms),
                "idle": idle_cpu(store, args.idle_s), "burst": burst(store, repo, args.burst)}


if __name__ == "__main__":
    main()
