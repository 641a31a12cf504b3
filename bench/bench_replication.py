"""Replication benchmark (issue 15): how long a checkpoint takes to reach a
remote, and whether replication slows a capture.

One private snapshot service; two worktrees of the same small tree (a plain
git repository by default, ``--backend jj`` for a colocated jj one): one
with a remote (a bare repository over ``file://``), one without.  Rounds
alternate, off then on, so both see the same machine.  Each round is a burst
of ``--calls`` tool calls: edit one file, then one capture request over the
service's socket, back to back, as an agent's hook would send them.

* capture latency with replication off and on: the socket round trip of
  each call (median, p90, p99);
* replication lag: from a capture's answer to the moment its commit is on
  the remote.  The remote's post-receive hook logs the time of every push it
  takes and the refs it moved; a git checkpoint is on the remote once its
  attempt's ref is at it or a later checkpoint (a chain), a jj one once its
  own ref is;
* baseline: a raw ``git push`` of one new commit to a bare ``file://``
  remote, timed in the same run: the floor of any replication.

Usage: ``.venv/bin/python bench/bench_replication.py [--calls 200 --rounds 2]``.
It stops if a capture fails or a checkpoint never reaches the remote.  Not a
test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchkit import Bench, Samples, timed

RESULTS = Path(__file__).resolve().parent / "results"
N_FILES = 1000


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def bare_remote(bench: Bench, path: Path) -> Path:
    """A bare repository whose post-receive hook logs ``<time> <new> <ref>``."""
    timed([bench.git, "init", "-q", "--bare", str(path)], env=bench.env)
    hook = path / "hooks" / "post-receive"
    hook.write_text(f'#!/bin/sh\nnow=$(date +%s.%N)\nwhile read old new ref; do '
                    f'echo "$now $new $ref" >> {path}/pushes.log; done\n')
    hook.chmod(0o755)
    return path


def make_repo(bench: Bench, path: Path, backend: str) -> Path:
    for i in range(N_FILES):
        f = path / f"d{i // 100:02d}" / f"f{i:04d}.txt"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"file {i}\n")
    if backend == "jj":
        timed([bench.jj, "git", "init", "--colocate", str(path)], env=bench.env)
    else:
        env = {**bench.env, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
               "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
        for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "init"]):
            timed([bench.git, "-C", str(path), *argv], env=env)
    return path


def burst(bench: Bench, repo: Path, run_id: str, calls: int) -> list[tuple[str, float, float]]:
    """``calls`` edits and captures; ``(commit, seconds, answered at)`` each."""
    from durability.ground import client

    sock = Path(bench.env["DURABILITY_SOCKET"])
    out = []
    for i in range(calls):
        with (repo / "d00" / "f0000.txt").open("a") as f:
            f.write(f"call {i}\n")
        request = {"v": 1, "op": "capture", "request_id": str(uuid.uuid4()), "run_id": run_id,
                   "node_id": "bench", "worktree": str(repo), "source": "hook",
                   "timeout_ms": 600_000}
        started = time.perf_counter()
        answer = client.call(sock, request, timeout_s=600)
        elapsed = time.perf_counter() - started
        if not answer.get("ok") or answer.get("deduped"):
            sys.exit(f"bench: capture failed or found nothing new: {answer}")
        out.append((str(answer["commit_id"]), elapsed, time.time()))
    return out


def arrivals(remote: Path, commits: list[str], timeout_s: float) -> list[float]:
    """When each commit reached the remote (epoch seconds), waiting for all."""
    index = {c: i for i, c in enumerate(commits)}
    deadline = time.monotonic() + timeout_s
    while True:
        got: list[float | None] = [None] * len(commits)
        log = remote / "pushes.log"
        for line in (log.read_text().splitlines() if log.exists() else []):
            at, new, ref = line.split(" ", 2)
            if new not in index:
                continue
            # A git attempt ref at checkpoint k carries every earlier one; a
            # jj ref carries its own commit.
            upto = index[new] if ref.startswith("refs/durability/git/") else None
            for k in range(upto + 1) if upto is not None else [index[new]]:
                if got[k] is None:
                    got[k] = float(at)
        if all(g is not None for g in got):
            return [g for g in got if g is not None]
        if time.monotonic() > deadline:
            missing = sum(g is None for g in got)
            sys.exit(f"bench: {missing} checkpoint(s) never reached the remote")
        time.sleep(0.05)


def raw_push(bench: Bench, repo: Path, remote: Path, reps: int) -> Samples:
    """``git push`` of one new commit (on its own ref) to a bare remote."""
    out = Samples("raw git push, one new commit")
    env = {**bench.env, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    git_dir = repo / ".git"
    for i in range(reps):
        tree = subprocess.run([bench.git, f"--git-dir={git_dir}", "mktree"], input=b"",
                              capture_output=True, env=env, check=True).stdout.decode().strip()
        commit = subprocess.run([bench.git, f"--git-dir={git_dir}", "commit-tree", tree, "-m",
                                 f"raw {i}"], capture_output=True, env=env,
                                check=True).stdout.decode().strip()
        ref = f"refs/bench/raw-{i}"
        subprocess.run([bench.git, f"--git-dir={git_dir}", "update-ref", ref, commit], env=env,
                       check=True)
        seconds, _ = timed([bench.git, f"--git-dir={git_dir}", "push", "-q", remote.as_uri(),
                            f"{ref}:{ref}"], env=env)
        out.add(seconds)
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="tool calls per burst")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of each (off, on, off, on, ...)")
    parser.add_argument("--backend", choices=("git", "jj"), default="git")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--no-json", action="store_true",
                        help="do not write bench/results/replication-<time>.json")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="durability-bench-repl-", dir=args.workdir)).resolve()
    bench = Bench(root)
    off, on = Samples("capture, replication off"), Samples("capture, replication on")
    lags: list[float] = []
    try:
        repo_off = make_repo(bench, root / "off", args.backend)
        repo_on = make_repo(bench, root / "on", args.backend)
        remote = bare_remote(bench, root / "remote.git")
        timed([bench.durability, "remote", "add", "bench", remote.as_uri(), "--worktree",
               str(repo_on)], env=bench.env)
        raw = raw_push(bench, repo_off if args.backend == "git" else repo_on,
                       bare_remote(bench, root / "raw.git"), 20)
        _, started = timed([bench.durability, "serve", "--detach", "--json"], env=bench.env)
        bench.service_pid = int(json.loads(started.stdout)["pid"])
        for r in range(args.rounds):
            for _, seconds, _ in burst(bench, repo_off, f"bench-off-{r}", args.calls):
                off.add(seconds)
            done = burst(bench, repo_on, f"bench-on-{r}", args.calls)
            for _, seconds, _ in done:
                on.add(seconds)
            reached = arrivals(remote, [c for c, _, _ in done], timeout_s=300)
            lags += [(at - answered) * 1000 for (_, _, answered), at in zip(done, reached,
                                                                            strict=True)]
        ping = bench.ping()
        pushes = int(ping.get("pushes", 0))
    finally:
        bench.stop_service()
        shutil.rmtree(root, ignore_errors=True)
    report: dict[str, Any] = {
        "backend": args.backend, "calls": args.calls, "rounds": args.rounds,
        "loadavg_at_end": [round(x, 2) for x in os.getloadavg()],
        "capture_off_ms": {"median": off.median, "p90": off.p90,
                           "p99": percentile(off.ms, 0.99)},
        "capture_on_ms": {"median": on.median, "p90": on.p90, "p99": percentile(on.ms, 0.99)},
        "lag_ms": {"median": percentile(lags, 0.5), "p99": percentile(lags, 0.99),
                   "max": max(lags)},
        "raw_push_ms": {"median": raw.median, "p90": raw.p90},
        "pushes": pushes, "checkpoints_pushed": len(lags),
    }
    print(f"replication bench: {args.backend}, {args.rounds} round(s) of {args.calls} calls, "
          f"{N_FILES} files; load at end {report['loadavg_at_end']}")
    for name, s in (("capture, replication off", report["capture_off_ms"]),
                    ("capture, replication on", report["capture_on_ms"])):
        print(f"  {name:<28} median {s['median']:7.1f} ms  p90 {s['p90']:7.1f}  "
              f"p99 {s['p99']:7.1f}")
    print(f"  {'on / off (median)':<28} {report['capture_on_ms']['median'] / off.median:7.2f}x")
    lag = report["lag_ms"]
    print(f"  {'replication lag':<28} median {lag['median']:7.1f} ms  p99 {lag['p99']:7.1f}  "
          f"max {lag['max']:7.1f}")
    print(f"  {'raw git push (baseline)':<28} median {raw.median:7.1f} ms  p90 {raw.p90:7.1f}")
    print(f"  {'lag / raw push (median)':<28} {lag['median'] / raw.median:7.2f}x")
    print(f"  pushes: {pushes} for {len(lags)} checkpoints "
          f"({len(lags) / max(pushes, 1):.1f} per push)")
    if not args.no_json:
        RESULTS.mkdir(exist_ok=True)
        out = RESULTS / time.strftime("replication-%Y%m%d-%H%M%S.json")
        out.write_text(json.dumps(report, indent=2))
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
