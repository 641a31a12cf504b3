"""Informed hook captures benchmark (issue 12): what a hook costs when the
service already watches the worktree.

For each size (default 1,000 and 100,000 small files, 100 per folder), a plain
git worktree and a colocated jj worktree, one private service for the run, and
per repetition, interleaved so every column sees the same machine state:

* hook end to end after a one-file edit (git): the changed path only;
* hook end to end after no change at all (git and jj): the quiet answer;
* hook end to end after a one-file edit (jj): jj still scans;
* raw ``jj util snapshot`` after a one-file edit, with jj's default file
  system monitor (none) and, when ``watchman`` is installed, with
  ``core.fsmonitor=watchman`` (jj's own watchman support);
* ``git status --porcelain`` after a one-file edit, the git floor for a scan.

Targets: git hook end to end at 100,000 files within 2x of the same at 1,000;
a no-change hook at 100,000 files at most 30 ms end to end on both backends.
The service's ping counters say which path each batch took; the bench stops if
a quiet answer came where a capture was due, or the other way round.

Usage: ``.venv/bin/python bench/bench_informed.py [--sizes 1000,100000 --reps 15]``.
Not a test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import Bench, Samples, StubService, timed, timed_cpu

RESULTS = Path(__file__).resolve().parent / "results"
COLUMNS = ("hook, one-file edit (git)", "hook, no change (git)",
           "service call, no change (git)", "hook, one-file edit (jj)", "hook, no change (jj)",
           "service call, no change (jj)", "jj util snapshot",
           "jj util snapshot, fsmonitor=watchman", "git status --porcelain",
           "hook, stub socket answers at once (floor)")


class Sized:
    """One size: its two worktrees and its samples."""

    def __init__(self, bench: Bench, n_files: int, watchman: str | None) -> None:
        self.bench, self.n = bench, n_files
        started = time.perf_counter()
        self.jj_repo, jj_first = bench.build_repo(n_files)
        self.git_repo = self._git_repo()
        self.watchman = watchman
        self.cols = {name: Samples(name) for name in COLUMNS}
        self.calls = 0
        #: Repetitions where a batch did not take the path its column times.
        self.off_path: list[str] = []
        print(f"  {n_files:>7} files: built in {time.perf_counter() - started:.1f}s (first jj "
              f"snapshot {jj_first:.2f}s)", file=sys.stderr)

    def _git_repo(self) -> Path:
        """A plain git worktree of the same files, committed."""
        b = self.bench
        repo = b.root / f"git-{self.n}"
        shutil.copytree(self.jj_repo, repo, ignore=shutil.ignore_patterns(".jj", ".git"))
        env = {**b.env, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
               "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid"}
        for args in (("init", "-q", "-b", "main"), ("add", "-A"), ("commit", "-q", "-m", "base")):
            subprocess.run([b.git, "-C", str(repo), *args], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        return repo

    def hook(self, repo: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
        self.calls += 1
        payload = json.dumps({
            "session_id": f"bench-informed-{self.n}-{repo.name}", "cwd": str(repo),
            "hook_event_name": "PostToolUse", "tool_name": "Read",
            "tool_input": {"file_path": str(repo / "README")}, "tool_response": {},
            "tool_use_id": f"toolu_informed_{self.n}_{self.calls:05d}",
            "transcript_path": str(self.bench.root / "transcript.jsonl"),
        }).encode()
        return timed_cpu([self.bench.durability, "snapshot-hook"], env=env or self.bench.env,
                         stdin=payload)

    def socket_call(self, repo: Path, *, expect_dedup: bool = True) -> float:
        """One capture request over the socket from this process: the
        service's part of a hook, without the hook's process."""
        from durability.ground import client

        self.calls += 1
        request = {"v": 1, "op": "capture", "request_id": f"bench-{self.n}-{self.calls}",
                   "run_id": f"bench-informed-{self.n}-{repo.name}", "node_id": "session",
                   "worktree": str(repo), "source": "hook", "timeout_ms": 600_000}
        started = time.perf_counter()
        answer = client.call(Path(self.bench.env["DURABILITY_SOCKET"]), request, timeout_s=600)
        elapsed = time.perf_counter() - started
        if not answer.get("ok") or (expect_dedup and not answer.get("deduped")):
            sys.exit(f"bench: a no-change call was not a dedup: {answer}")
        return elapsed

    def warm(self) -> None:
        """The first captures of each worktree (a full scan, and the watch
        armed), over the socket with no deadline: at 100,000 files the first
        git scan hashes every file, longer than a hook waits."""
        for repo in (self.git_repo, self.jj_repo):
            for _ in range(2):
                self.socket_call(repo, expect_dedup=False)
            self.hook(repo)

    def one_rep(self) -> None:
        b = self.bench
        for repo, backend in ((self.git_repo, "git"), (self.jj_repo, "jj")):
            b.edit_one(repo, self.n)
            before = b.ping()["informed"]
            self.cols[f"hook, one-file edit ({backend})"].add(*self.hook(repo))
            middle = b.ping()["informed"]
            self.cols[f"hook, no change ({backend})"].add(*self.hook(repo))
            after = b.ping()["informed"]
            if middle["quiet"] != before["quiet"]:
                sys.exit(f"bench: an edit was answered quietly ({backend}): {before} {middle}")
            # Not a failure, but the figure would not be the informed one: say so.
            if after["quiet"] != middle["quiet"] + 1:
                self.off_path.append(f"{backend}: a no-change call was captured")
            if backend == "git" and middle["informed"] != before["informed"] + 1:
                self.off_path.append("git: an edit was captured by a full scan")
            self.cols[f"service call, no change ({backend})"].add(self.socket_call(repo))
        b.edit_one(self.jj_repo, self.n)
        self.cols["jj util snapshot"].add(timed(b.jj_argv(self.jj_repo, "util", "snapshot"),
                                                env=b.env, cwd=self.jj_repo)[0])
        if self.watchman is not None:
            b.edit_one(self.jj_repo, self.n)
            argv = b.jj_argv(self.jj_repo, "--config", "fsmonitor.backend=watchman",
                             "util", "snapshot")
            self.cols["jj util snapshot, fsmonitor=watchman"].add(
                timed(argv, env=b.env, cwd=self.jj_repo)[0])
        stub = {**b.env, "DURABILITY_SOCKET": str(b.root / "stub.sock")}
        self.cols["hook, stub socket answers at once (floor)"].add(*self.hook(self.git_repo, stub))
        b.edit_one(self.git_repo, self.n)
        self.cols["git status --porcelain"].add(timed(
            [b.git, "-C", str(self.git_repo), "status", "--porcelain"], env=b.env)[0])


def _watchman(bench: Bench) -> str | None:
    """watchman, started for the bench's jj (its state under the bench folder)."""
    exe = shutil.which("watchman")
    if exe is None:
        return None
    state = bench.root / "watchman"
    state.mkdir()
    bench.env["WATCHMAN_SOCK"] = str(state / "sock")
    done = subprocess.run([exe, "--sockname", str(state / "sock"), "--statefile",
                           str(state / "state"), "--logfile", str(state / "log"),
                           "--pidfile", str(state / "pid"), "get-sockname"],
                          env=bench.env, capture_output=True, timeout=60)
    if done.returncode != 0:
        print(f"bench: watchman did not start: {done.stderr.decode(errors='replace')}",
              file=sys.stderr)
        return None
    return exe


def _stop_watchman(bench: Bench, exe: str | None) -> None:
    if exe is not None:
        subprocess.run([exe, "shutdown-server"], env=bench.env, capture_output=True,
                       timeout=60, check=False)


def report(sizes: list[Sized], watchman: str | None) -> list[str]:
    lines = ["| | " + " | ".join(f"{s.n:,} files" for s in sizes) + " |",
             "|---|" + "---:|" * len(sizes)]
    for name in COLUMNS:
        if name.endswith("watchman") and watchman is None:
            continue
        lines.append(f"| {name} | " + " | ".join(s.cols[name].cell() for s in sizes) + " |")
    small, big = sizes[0], sizes[-1]
    edit = "hook, one-file edit (git)"
    ratio = big.cols[edit].median / small.cols[edit].median
    lines += ["", f"git hook after a one-file edit, {big.n:,} vs {small.n:,} files: "
              f"{ratio:.2f}x (target <= 2x: {'met' if ratio <= 2 else 'NOT met'})"]
    for backend in ("git", "jj"):
        col = big.cols[f"hook, no change ({backend})"]
        floor = big.cols["hook, stub socket answers at once (floor)"]
        lines.append(f"no-change hook at {big.n:,} files ({backend}): {col.median:.1f} ms "
                     f"median, CPU {col.cpu_median:.1f} ms; the hook's own floor (stub "
                     f"socket) {floor.median:.1f} ms, CPU {floor.cpu_median:.1f} ms (target "
                     f"<= 30 ms: {'met' if col.median <= 30 else 'NOT met'})")
    for s in sizes:
        if s.off_path:
            lines.append(f"{s.n:,} files, off the timed path: {', '.join(s.off_path)}")
    if watchman is not None:
        plain = big.cols["jj util snapshot"].median
        mon = big.cols["jj util snapshot, fsmonitor=watchman"].median
        lines.append(f"jj util snapshot at {big.n:,} files: {plain:.1f} ms without, "
                     f"{mon:.1f} ms with watchman ({plain / mon:.2f}x)")
    else:
        lines.append("watchman is not installed: jj's fsmonitor was not measured")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--no-json", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="bench-informed-",
                                     ignore_cleanup_errors=True) as tmp:
        bench = Bench(Path(tmp))
        # The periodic full capture (one a minute per worktree, costing what
        # a first capture costs) is off here: the bench checks which path
        # each call took, and a long run would cross the bound mid-rep.
        bench.env["DURABILITY_INFORMED_RESCAN_MS"] = "0"
        watchman = _watchman(bench)
        bench.start_service()
        stub = StubService(bench.root / "stub.sock").__enter__()
        try:
            runs = [Sized(bench, n, watchman) for n in sizes]
            for run in runs:
                run.warm()
            for _ in range(args.reps):
                for run in runs:
                    run.one_rep()
            stats = bench.ping()["informed"]
        finally:
            stub.__exit__()
            bench.stop_service()
            _stop_watchman(bench, watchman)
    lines = report(runs, watchman)
    print("\n".join(lines))
    print(f"service counters: {stats}")
    print(f"machine: nproc {os.cpu_count()}, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}; whole run {time.time() - started:.0f}s")
    if not args.no_json:
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / f"informed-{time.strftime('%Y%m%d-%H%M%S')}.json"
        out.write_text(json.dumps({
            "sizes": {str(r.n): {n: c.to_json() for n, c in r.cols.items()} for r in runs},
            "counters": stats, "report": lines}, indent=1))
        print(f"samples: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
