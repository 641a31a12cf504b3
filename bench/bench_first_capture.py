"""First-capture benchmark (issue 25): the first hook call on a large
repository with a fresh state folder, against the tool's own status scan.

For a git repository of N small files (100 per folder; committed, so the
user's ``.git/index`` knows every file) and, with ``--jj``, a colocated jj
repository of the same tree, each repetition starts from nothing of ours
(a new state folder, no ``.git/durability``, no ``.jj/durability``), edits
one file and times, interleaved:

* ``git status --porcelain`` (git: the floor the target is measured against);
* ``durability snapshot-hook`` end to end (no service: the in-process
  capture a first call makes), which must answer with a checkpoint and
  record no gap;
* jj: ``jj util snapshot`` after its own edit, then the hook on a fresh state;
* with ``--autostart``, also the hook as a new user's first call runs it
  (``DURABILITY_AUTOSTART`` on, the default): no service answers, so the
  hook starts one beside it and captures in process meanwhile; the service
  it started is stopped before the next measurement.

Target: hook <= 2x ``git status`` (git) and <= 2x ``jj util snapshot`` (jj)
at 100,000 files.  Prints medians (wall, and CPU: the process and every
child it waited for, git's included), the ratio and the load average.  Not a
test: it asserts nothing about speed, but stops when a call records a gap
or no checkpoint.

Usage: ``.venv/bin/python bench/bench_first_capture.py [--files 100000 --reps 5 --jj
--autostart]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from benchkit import Bench, timed


def build(bench: Bench, repo: Path, n_files: int, *, jj: bool) -> None:
    for i in range(n_files):
        path = bench.file_of(repo, i)
        if i % 100 == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n" * 4)
    env = {**bench.env, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    if jj:
        timed([bench.jj, "git", "init", "--colocate", str(repo)], env=bench.env)
        timed(bench.jj_argv(repo, "util", "snapshot"), env=bench.env)
    else:
        timed([bench.git, "init", "-q", str(repo)], env=env)
    timed([bench.git, "-c", "gc.auto=0", "-C", str(repo), "add", "-A"], env=env)
    timed([bench.git, "-c", "gc.auto=0", "-C", str(repo), "commit", "-q", "-m", "tree"],
          env=env)
    # A real repository's history is packed; the loose objects of one big
    # commit are not what a user's repository looks like.
    timed([bench.git, "-C", str(repo), "gc", "-q"], env=env)


def fresh(bench: Bench, repo: Path, rep: int) -> dict[str, str]:
    """Nothing of ours left: a new state folder, no private index or store."""
    for ours in (repo / ".git" / "durability", repo / ".jj" / "durability"):
        shutil.rmtree(ours, ignore_errors=True)
    home = bench.root / f"state-{rep}"
    return {**bench.env, "DURABILITY_HOME": str(home),
            "DURABILITY_SPOOL_DIR": str(bench.root / f"spool-{rep}"),
            "DURABILITY_SOCKET": str(bench.root / "run" / f"absent-{rep}.sock"),
            "DURABILITY_AUTOSTART": "0"}


CPU: dict[str, list[float]] = {}


def cpu_timed(name: str, argv: list[str], **kw: Any) -> tuple[float, Any]:
    """``timed``, also keeping the CPU time (user + system) of the process
    and of every child it waited for (the hook's git), in ``CPU[name]``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds, done = timed(argv, **kw)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(name, []).append(1000 * ((after.ru_utime - before.ru_utime)
                                            + (after.ru_stime - before.ru_stime)))
    return seconds, done


def hook(bench: Bench, repo: Path, env: dict[str, str], run_id: str, path: Path,
         name: str = "first hook, fresh state") -> float:
    payload = json.dumps({
        "session_id": run_id, "cwd": str(repo), "permission_mode": "default",
        "transcript_path": str(bench.root / "transcript.jsonl"),
        "hook_event_name": "PostToolUse", "tool_name": "Edit",
        "tool_input": {"file_path": str(path), "old_string": "a", "new_string": "b"},
        "tool_response": {"filePath": str(path), "userModified": False},
        "tool_use_id": f"toolu_{uuid.uuid4().hex[:12]}"}).encode()
    seconds, done = cpu_timed(name, [bench.durability, "snapshot-hook"], env=env, stdin=payload)
    if done.stdout.strip() or done.stderr.strip():
        print(f"  hook said: {done.stdout.decode()[:300]} {done.stderr.decode()[:300]}")
    verify(bench, repo, env, run_id)
    return seconds * 1000


def verify(bench: Bench, repo: Path, env: dict[str, str], run_id: str) -> None:
    """One checkpoint and no gap, as ``durability log`` reads them back."""
    _, done = timed([bench.durability, "log", "--json", str(repo)], env=env, cwd=repo)
    kinds = [e["kind"] for e in json.loads(done.stdout) if e["run_id"] == run_id]
    if kinds != ["checkpoint"]:
        sys.exit(f"bench: the first hook call recorded {kinds} (one checkpoint expected)")


def stop_started(bench: Bench, env: dict[str, str]) -> None:
    """Stop the service a hook with autostart on started: once it serves
    (its socket answers a ping), ``durability stop``."""
    import time

    from durability.ground import client

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if client.call(Path(env["DURABILITY_SOCKET"]), {"v": 1, "op": "ping"},
                           timeout_s=5).get("ok"):
                break
        except Exception:  # not serving yet
            time.sleep(0.05)
    else:
        sys.exit("bench: the autostarted service never answered")
    timed([bench.durability, "stop", "--kill"], env=env)


def run(bench: Bench, n_files: int, reps: int, *, jj: bool,
        autostart: bool = False) -> dict[str, list[float]]:
    repo = bench.root / ("jj" if jj else "git") / "repo"
    build(bench, repo, n_files, jj=jj)
    floor_name = "jj util snapshot" if jj else "git status --porcelain"
    cols: dict[str, list[float]] = {floor_name: [], "first hook, fresh state": []}
    if autostart:
        cols["first hook, autostart on"] = []
    for rep in range(reps):
        bench.edit_one(repo, n_files)
        if jj:
            floor_s, _ = cpu_timed(floor_name, bench.jj_argv(repo, "util", "snapshot"),
                                   env=bench.env)
        else:
            floor_s, _ = cpu_timed(floor_name, [bench.git, "-C", str(repo), "status",
                                                "--porcelain"], env=bench.env)
        cols[floor_name].append(floor_s * 1000)
        path = bench.edit_one(repo, n_files)
        env = fresh(bench, repo, rep + (1000 if jj else 0))
        cols["first hook, fresh state"].append(
            hook(bench, repo, env, f"first-{'jj' if jj else 'git'}-{rep}", path))
        if autostart:
            path = bench.edit_one(repo, n_files)
            env = {**fresh(bench, repo, rep + (3000 if jj else 2000)),
                   "DURABILITY_AUTOSTART": "1"}
            cols["first hook, autostart on"].append(
                hook(bench, repo, env, f"auto-{'jj' if jj else 'git'}-{rep}", path,
                     "first hook, autostart on"))
            stop_started(bench, env)
    return cols


def report(n_files: int, backend: str, cols: dict[str, list[float]]) -> None:
    names = list(cols)
    meds = {n: statistics.median(v) for n, v in cols.items()}
    print(f"\n{backend}, {n_files:,} files ({len(cols[names[0]])} interleaved reps), "
          f"load {os.getloadavg()[0]:.2f}")
    for name in names:
        cpu = CPU.pop(name, [])
        print(f"  {name:32s} median {meds[name]:9.1f} ms   "
              f"[{', '.join(f'{x:.0f}' for x in cols[name])}]   "
              f"CPU {statistics.median(cpu) if cpu else float('nan'):.1f} ms")
    for name in names[1:]:
        print(f"  ratio {name} / {names[0]}: {meds[name] / meds[names[0]]:.2f}x "
              "(target <= 2x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--jj", action="store_true", help="also measure a colocated jj repo")
    parser.add_argument("--no-git", action="store_true")
    parser.add_argument("--autostart", action="store_true",
                        help="also time a new user's first call (the hook starts a service)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-first-") as tmp:
        bench = Bench(Path(tmp))
        if not args.no_git:
            report(args.files, "git", run(bench, args.files, args.reps, jj=False,
                                          autostart=args.autostart))
        if args.jj:
            report(args.files, "jj (colocated)",
                   run(bench, args.files, args.reps, jj=True, autostart=args.autostart))


if __name__ == "__main__":
    main()
