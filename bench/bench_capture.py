"""Capture benchmark (issue 2): what a checkpoint costs, at 1k, 10k and 100k files.

Builds colocated jj repositories of synthetic files and measures, in one run
and interleaved per repetition so every column sees the same machine state,
after a one-file edit:

* raw ``jj util snapshot``, and ``jj log -r @`` (the command the backend runs);
* the in-process ``Capturer`` (file lock, jj, pygit2 pin, SQLite row);
* one capture request over the service's socket (no process start);
* ``durability snapshot-hook`` end to end, process start to exit, service up;
* a git baseline: ``git add -A`` + ``git write-tree`` with a private index;

then 16 concurrent hook processes (and 16 concurrent socket requests) on one
worktree: wall time and how many jj snapshots the service ran (its ping
reports ``captures``).  Targets: hook end to end <= raw jj + 15 ms at the
median; 16 concurrent calls run at most 3 jj snapshots.

Usage: ``make bench`` or ``.venv/bin/python bench/bench_capture.py --sizes
1000,10000 --reps 10``.  Not a test: it asserts nothing about speed, but it
stops if any capture fails or leaves a gap.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchkit import Bench, Samples, StubService, timed, timed_cpu
from report import SizeResult, print_report, to_json

RESULTS = Path(__file__).resolve().parent / "results"
COLUMNS = ("raw jj util snapshot", "jj log -r @", "in-process Capturer", "service call",
           "hook end to end", "git add -A + write-tree", "  of which pygit2 pin",
           "  of which SQLite row")


class Runner:
    """The measurements of one size, against one repository."""

    def __init__(self, bench: Bench, repo: Path, n_files: int) -> None:
        from durability.capture.capturer import Capturer
        from durability.capture.inprocess import lazy_store
        from durability.config import Settings

        self.bench, self.repo, self.n = bench, repo, n_files
        self.settings = Settings.from_env(bench.env)
        self.capturer = Capturer(settings=self.settings, store=lazy_store(self.settings),
                                 env=bench.env)
        self.hook_run = f"bench-hook-{n_files}"
        self.calls = 0

    def one_rep(self, result: SizeResult) -> None:
        """One sample of every column, each after its own one-file edit."""
        b, repo = self.bench, self.repo
        b.edit_one(repo, self.n)
        result.col(COLUMNS[0]).add(*timed_cpu(b.jj_argv(repo, "util", "snapshot"), env=b.env))
        b.edit_one(repo, self.n)
        result.col(COLUMNS[1]).add(timed(b.jj_argv(
            repo, "log", "-r", "@", "--no-graph", "-T", 'commit_id ++ " " ++ change_id'),
            env=b.env)[0])
        b.edit_one(repo, self.n)
        elapsed, commit_id = self._in_process()
        result.col(COLUMNS[2]).add(elapsed)
        self._parts(result, commit_id)
        b.edit_one(repo, self.n)
        result.col(COLUMNS[3]).add(self._socket_call(f"bench-svc-{self.n}"))
        path = b.edit_one(repo, self.n)
        result.col(COLUMNS[4]).add(*timed_cpu([b.durability, "snapshot-hook"], env=b.env,
                                              stdin=self._payload(path)))
        b.edit_one(repo, self.n)
        genv = b.git_env(self.n)
        add_s = timed([b.git, "-C", str(repo), "add", "-A"], env=genv)[0]
        result.col(COLUMNS[5]).add(add_s + timed([b.git, "-C", str(repo), "write-tree"],
                                                 env=genv)[0])

    def _parts(self, result: SizeResult, commit_id: str) -> None:
        """Two pieces of the Capturer's time beyond jj, timed on their own:
        pinning the commit (pygit2 opens the repo, writes a ref) and recording
        the row (one SQLite transaction, synchronous=FULL)."""
        from durability.backends.jj import git_dir, pin
        from durability.store import AttemptKey, NewCheckpoint

        started = time.perf_counter()
        pin(git_dir(self.repo), commit_id)
        result.col(COLUMNS[6]).add(time.perf_counter() - started)
        row = NewCheckpoint(key=AttemptKey(f"bench-row-{self.n}", "bench"), commit_id=commit_id,
                            worktree=str(self.repo), source="manual",
                            request_id=str(uuid.uuid4()))
        store = self.capturer._store()  # the Capturer's own, already open
        started = time.perf_counter()
        store.record_checkpoint(row)
        result.col(COLUMNS[7]).add(time.perf_counter() - started)

    def _in_process(self) -> tuple[float, str]:
        from durability.capture.capturer import CaptureRequest
        from durability.store import AttemptKey

        request = CaptureRequest(key=AttemptKey(f"bench-inproc-{self.n}", "bench"),
                                 worktree=self.repo, source="manual",
                                 request_id=str(uuid.uuid4()))
        started = time.perf_counter()
        outcome = self.capturer.capture([request], lock_timeout_s=120)[0]
        elapsed = time.perf_counter() - started
        if not outcome.ok or outcome.deduped or outcome.commit_id is None:
            sys.exit(f"bench: in-process capture failed or found nothing new: {outcome}")
        return elapsed, outcome.commit_id

    def _socket_call(self, run_id: str, *, expect_new: bool = True) -> float:
        from durability.ground import client

        request = {"v": 1, "op": "capture", "request_id": str(uuid.uuid4()), "run_id": run_id,
                   "node_id": "bench", "worktree": str(self.repo), "source": "manual",
                   "timeout_ms": 600_000}
        started = time.perf_counter()
        answer = client.call(Path(self.bench.env["DURABILITY_SOCKET"]), request, timeout_s=600)
        elapsed = time.perf_counter() - started
        if not answer.get("ok") or (expect_new and answer.get("deduped")):
            sys.exit(f"bench: service capture failed or found nothing new: {answer}")
        return elapsed

    def _payload(self, path: Path) -> bytes:
        """A Claude Code PostToolUse payload for an Edit of ``path``."""
        self.calls += 1
        return json.dumps({
            "session_id": self.hook_run, "cwd": str(self.repo), "permission_mode": "default",
            "transcript_path": str(self.bench.root / "transcript.jsonl"),
            "hook_event_name": "PostToolUse", "tool_name": "Edit",
            "tool_input": {"file_path": str(path), "old_string": "a", "new_string": "b"},
            "tool_response": {"filePath": str(path), "userModified": False},
            "tool_use_id": f"toolu_bench_{self.n}_{self.calls:05d}",
        }).encode()

    def concurrent_hooks(self, k: int) -> tuple[float, int]:
        """``k`` hook processes started together after one edit."""
        import subprocess

        path = self.bench.edit_one(self.repo, self.n)
        # Payloads come from files, not pipes: a pipe fed one process after
        # another would serialise the hooks and measure nothing concurrent.
        inputs = []
        for i in range(k):
            payload_file = self.bench.root / f"payload-{i}.json"
            payload_file.write_bytes(self._payload(path))
            inputs.append(payload_file.open("rb"))
        before = self.bench.captures()
        started = time.perf_counter()
        procs = [subprocess.Popen([self.bench.durability, "snapshot-hook"], env=self.bench.env,
                                  stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for f in inputs]
        outs = [p.communicate(timeout=600) for p in procs]
        wall = time.perf_counter() - started
        for f in inputs:
            f.close()
        for p, (out, err) in zip(procs, outs, strict=True):
            if p.returncode != 0 or out or err:
                sys.exit(f"bench: a concurrent hook exited {p.returncode}: {err!r}")
        return wall * 1000, self.bench.captures() - before

    def concurrent_socket(self, k: int) -> tuple[float, int]:
        """``k`` capture requests sent over the socket at once, from threads."""
        self.bench.edit_one(self.repo, self.n)
        barrier = threading.Barrier(k + 1)
        errors: list[BaseException] = []

        def one() -> None:
            barrier.wait()
            try:
                self._socket_call(f"bench-conc-{self.n}", expect_new=False)
            except BaseException as exc:  # SystemExit from a failed call included
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(k)]
        for t in threads:
            t.start()
        before = self.bench.captures()
        barrier.wait()
        started = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
        if errors:
            sys.exit(f"bench: a concurrent socket request failed: {errors[0]}")
        return wall * 1000, self.bench.captures() - before


def measure(bench: Bench, n_files: int, reps: int, k: int, rounds: int) -> SizeResult:
    print(f"\n[{n_files:,} files] building the repository ...", flush=True)
    started = time.perf_counter()
    repo, first = bench.build_repo(n_files)
    git_first = timed([bench.git, "-C", str(repo), "add", "-A"], env=bench.git_env(n_files))[0]
    print(f"[{n_files:,} files] built in {time.perf_counter() - started:.1f}s "
          f"(first jj snapshot {first:.2f}s, first git add -A {git_first:.2f}s); "
          f"{reps} reps + 1 warm-up", flush=True)
    runner = Runner(bench, repo, n_files)
    result = SizeResult(n_files, reps, first)
    runner.one_rep(SizeResult(n_files, 0, 0))  # warm-up: caches, service threads
    for _ in range(reps):
        runner.one_rep(result)
    for _ in range(rounds):
        result.hook_rounds.append(runner.concurrent_hooks(k))
        result.socket_rounds.append(runner.concurrent_socket(k))
    verify(bench, runner, reps + 1)
    shutil.rmtree(repo, ignore_errors=True)  # keep disk use to one size at a time
    return result


def verify(bench: Bench, runner: Runner, hook_calls: int) -> None:
    """Every hook call recorded, no gap anywhere: otherwise the times mean nothing."""
    from durability.gaps.ingest import ingest_spool
    from durability.store import Store

    with Store(runner.settings.database) as store:
        ingest_spool(store, runner.settings.spool_dir)
        rows = store.checkpoints(runner.hook_run)
        gaps = [g for run in (runner.hook_run, f"bench-svc-{runner.n}",
                              f"bench-conc-{runner.n}", f"bench-inproc-{runner.n}")
                for g in store.gaps(run)]
    if gaps:
        sys.exit(f"bench: {len(gaps)} gap(s) recorded, first: {gaps[0]}")
    # Each timed hook call followed its own edit (a new row each); each
    # concurrent round adds one new commit, answered once and deduped after.
    if len(rows) < hook_calls:
        sys.exit(f"bench: {len(rows)} hook checkpoints recorded for {hook_calls} calls")


def floor(bench: Bench, reps: int) -> dict[str, Samples]:
    """What any hook pays before jj does anything (size independent): the bare
    interpreter, the interpreter with site (and the editable install's import
    finder), the hook's imports, and a whole hook answered by a stub socket."""
    py = sys.executable
    repo = bench.root / "floor-repo"
    timed([bench.jj, "git", "init", "--colocate", str(repo)], env=bench.env)
    stub_env = {**bench.env, "DURABILITY_SOCKET": str(bench.root / "stub.sock")}
    payload = json.dumps({"session_id": "bench-floor", "cwd": str(repo),
                          "hook_event_name": "PostToolUse", "tool_name": "Bash",
                          "tool_input": {"command": "true"}, "tool_use_id": "toolu_floor"})
    runs = {
        "python -I -S -c pass": ([py, "-I", "-S", "-c", "pass"], None),
        "python -c pass": ([py, "-c", "pass"], None),
        "python -c 'import durability.hook.entry'":
            ([py, "-c", "import durability.hook.entry"], None),
        "snapshot-hook, stub socket answers": ([bench.durability, "snapshot-hook"],
                                               payload.encode()),
    }
    out = {name: Samples(name) for name in runs}
    with StubService(bench.root / "stub.sock"):
        for _ in range(reps):
            for name, (argv, stdin) in runs.items():
                out[name].add(*timed_cpu(argv, env=stub_env, stdin=stdin))
    return out


def machine(bench: Bench) -> dict[str, Any]:
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    mem_kib = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    _, jj_out = timed([bench.jj, "--version"], env=bench.env)
    return {"nproc": os.cpu_count(), "memory_gib": round(mem_kib / 1024 / 1024, 1),
            "jj": jj_out.stdout.decode().strip(), "python": platform.python_version(),
            "kernel": platform.release(), "arch": platform.machine(),
            "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]}


def wait_for_quiet(limit: float, max_wait_s: float = 1800) -> None:
    deadline = time.monotonic() + max_wait_s
    while os.getloadavg()[0] >= limit and time.monotonic() < deadline:
        print(f"bench: load average {os.getloadavg()[0]:.2f} >= {limit}; waiting ...",
              flush=True)
        time.sleep(30)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000",
                        help="comma-separated file counts (default: %(default)s)")
    parser.add_argument("--reps", type=int, default=15,
                        help="repetitions per size (default: %(default)s)")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="simultaneous hook calls (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of concurrent calls per size (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where to build the repositories (default: a temp folder)")
    parser.add_argument("--wait-for-load", type=float, default=None, metavar="LOAD",
                        help="first wait (up to 30 min) until the 1-minute load average "
                             "is below LOAD: other work on the machine skews every figure")
    parser.add_argument("--no-json", action="store_true",
                        help="do not write bench/results/capture-<time>.json")
    args = parser.parse_args(argv)
    try:
        args.sizes = [int(x.replace("_", "")) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        parser.error("--sizes takes comma-separated whole numbers")
    if not args.sizes or min(args.sizes) < 10 or args.reps < 1:
        parser.error("sizes must be >= 10 files and --reps >= 1")
    return args


def main(argv: list[str] | None = None) -> int:

    args = parse_args(argv)
    if args.wait_for_load is not None:
        wait_for_quiet(args.wait_for_load)
    command = " ".join(["bench/bench_capture.py", *(sys.argv[1:] if argv is None else argv)])
    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="durability-bench-", dir=args.workdir)).resolve()
    bench = Bench(root)
    results: list[SizeResult] = []
    try:
        info = machine(bench)
        print(f"bench: {command}\nmachine: {info}", flush=True)
        bench.start_service()
        base = floor(bench, 20)
        for n in args.sizes:
            results.append(measure(bench, n, args.reps, args.concurrency, args.rounds))
    finally:
        bench.stop_service()
        shutil.rmtree(root, ignore_errors=True)
    total_s = time.perf_counter() - started
    # Other work on the machine shows in every figure: say how busy it was.
    info["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print_report(command, info, base, results, args.concurrency, total_s)
    if not args.no_json:
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / time.strftime("capture-%Y%m%d-%H%M%S.json")
        out.write_text(json.dumps(to_json(command, info, base, results, total_s), indent=2))
        print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
