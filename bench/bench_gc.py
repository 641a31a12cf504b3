"""Retention benchmark (issue 14): what ``durability gc`` frees after many captures.

For each backend, a worktree of ``--files`` small files (100 per folder) gets
``--captures`` checkpoints, each after its own one-file edit (a new 2 KiB
body, as an agent's edit of a source file; the edits go in turn to the
``--hot-files`` (100) files of a working set), through the real ``Capturer``
and store (git: the watcher-informed capture the service makes; jj: the one
``jj log`` every capture runs).  Their recorded times are spread evenly over
the ``--span-days`` before now (an injected clock: the captures themselves
run at machine speed), as an agent working every day for two months would
leave them.  Then, on the same store, one after the other:

1. the figures before: bytes of the store (git: the ``.git`` folder; jj: the
   whole ``.jj/repo``), our refs (``refs/durability/``), jj's keep refs,
   objects (``git count-objects -v``), checkpoint rows;
2. the raw baseline: ``git gc --prune=now`` (git) or ``jj util gc
   --expire=now`` (jj) alone, timed: what the tool's own gc frees while
   every checkpoint is still pinned;
3. ``durability gc`` with the default policy (7 days whole, hourly to 30,
   daily to 90), no prune grace, and for jj the op log trimmed to the
   operations of the last second (jj stamps operations with the real time,
   which the injected clock cannot move: see bench/RESULTS.md), timed.

Usage: ``.venv/bin/python bench/bench_gc.py [--files 10000 --captures 2000
--backends git,jj]``.  Not a test: it asserts nothing about size or speed,
but stops if a kept checkpoint no longer holds what was captured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchkit import Bench

from durability.backends.history import figures
from durability.capture.capturer import Capturer, CaptureRequest
from durability.config import Settings
from durability.retention.gc import run_gc
from durability.retention.policy import DAY_MS, Policy
from durability.store import AttemptKey, Store
from durability.store.clock import ManualClock, system_clock

RESULTS = Path(__file__).resolve().parent / "results"
KEY = AttemptKey("bench-gc", "session", 0, 1)


def build(bench: Bench, backend: str, n_files: int) -> Path:
    repo = bench.root / f"{backend}-{n_files}"
    for i in range(n_files):
        path = bench.file_of(repo, i)
        if i % 100 == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n" * 4)
    if backend == "jj":
        _run([bench.jj, "git", "init", "--colocate", str(repo)], bench.env)
    else:
        _run([bench.git, "init", "-q", "-b", "main", str(repo)], bench.env)
        _run([bench.git, "-C", str(repo), "add", "-A"], bench.env)
        _run([bench.git, "-C", str(repo), "-c", "user.name=Bench", "-c",
              "user.email=bench@example.invalid", "commit", "-q", "-m", "tree"], bench.env)
    return repo


def _run(argv: list[str], env: dict[str, str]) -> None:
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=3600)


def capture_many(bench: Bench, repo: Path, n_files: int, n: int, span_days: float, hot: int,
                 settings: Settings,
                 env: dict[str, str]) -> tuple[Store, dict[int, tuple[str, bytes]], float]:
    """``n`` captures, the k-th recorded at now - span + k * span / n."""
    now = system_clock()
    step = int(span_days * DAY_MS / n)
    clock = ManualClock(now - int(span_days * DAY_MS))
    store = Store(settings.database, clock=clock)
    capturer = Capturer(settings=settings, store=lambda: store, env=env)
    held: dict[int, tuple[str, bytes]] = {}
    started = time.perf_counter()
    for k in range(n):
        # An agent works on a set of files, editing each again and again: a
        # body it replaced lives on only in the checkpoints taken before.
        path = bench.file_of(repo, (k % hot) * (n_files // hot))
        body = os.urandom(1024).hex().encode()
        path.write_bytes(body)
        rel = path.relative_to(repo).as_posix()
        changed = frozenset({rel}) if k > 0 else None  # the first one scans the tree
        out = capturer.capture([CaptureRequest(
            key=KEY, worktree=repo, source="watch", request_id=str(uuid.uuid4()),
            changed_paths=changed)], lock_timeout_s=600)[0]
        if not out.ok or out.seq is None:
            sys.exit(f"bench: capture {k} failed: {out.error_code}: {out.error_message}")
        held[out.seq] = (rel, body)
        clock.advance(step)
        if (k + 1) % 500 == 0:
            print(f"  {k + 1}/{n} captures, {time.perf_counter() - started:.0f}s",
                  file=sys.stderr)
    return store, held, time.perf_counter() - started


def measure(bench: Bench, backend: str, n_files: int, n: int, span_days: float,
            hot: int) -> dict[str, Any]:
    print(f"{backend}: building {n_files} files", file=sys.stderr)
    repo = build(bench, backend, n_files)
    env = {**bench.env, "DURABILITY_HOME": str(bench.root / f"state-{backend}")}
    settings = Settings.from_env(env)
    store, held, capture_s = capture_many(bench, repo, n_files, n, span_days, hot, settings,
                                          env)
    git_dir, measured = _paths(repo, backend)
    before = figures(git_dir, measured)
    rows_before = len(store.checkpoints(KEY.run_id))
    started = time.perf_counter()
    raw = ([bench.git, "--git-dir", str(git_dir), "gc", "--quiet", "--prune=now"]
           if backend == "git" else bench.jj_argv(repo, "util", "gc", "--expire=now"))
    _run(raw, env)
    raw_s = time.perf_counter() - started
    after_raw = figures(git_dir, measured)
    # jj's operations all happened in the last minutes of real time.
    policy = Policy(prune_grace_s=0, jj_op_log_days=1 / 86_400)
    started = time.perf_counter()
    report = run_gc(settings, store, policy, now_ms=system_clock(), env=env).to_dict()
    gc_s = time.perf_counter() - started
    notes = [r["note"] for r in report["repositories"] if r["note"]]
    after = figures(git_dir, measured)
    rows = store.checkpoints(KEY.run_id)
    _check(repo, backend, rows, held)
    store.close()
    return {
        "backend": backend, "files": n_files, "captures": n, "span_days": span_days,
        "hot_files": hot,
        "capture_s": round(capture_s, 1), "raw_gc_s": round(raw_s, 2),
        "durability_gc_s": round(gc_s, 2),
        "rows": {"before": rows_before, "after": len(rows)},
        "kept_by": report["checkpoints"]["kept_by"],
        "before": before.__dict__, "after_raw_gc": after_raw.__dict__, "after": after.__dict__,
        "notes": notes,
        "op_log_abandoned": sum(r["op_log_abandoned"] for r in report["repositories"]),
    }


def _paths(repo: Path, backend: str) -> tuple[Path, list[Path]]:
    if backend == "jj":
        from durability.backends.jj import git_dir, repo_dir

        return git_dir(repo), [git_dir(repo), repo_dir(repo)]
    return repo / ".git", [repo / ".git"]


def _check(repo: Path, backend: str, rows: list[Any],
           held: dict[int, tuple[str, bytes]]) -> None:
    """Every kept checkpoint still holds the body its capture wrote."""
    import pygit2

    git_dir, _ = _paths(repo, backend)
    git = pygit2.Repository(str(git_dir))
    for row in rows:
        rel, body = held[row.seq]
        tree = git[row.commit_id].peel(pygit2.Commit).tree
        if bytes(git[tree[rel].id].data) != body:
            sys.exit(f"bench: kept seq {row.seq} lost its content after gc")


def _mib(n: int) -> str:
    return f"{n / 1048576:.1f} MiB"


def print_report(command: str, results: list[dict[str, Any]]) -> None:
    print(f"\n$ {command}")
    print(f"{platform.platform()}, {os.cpu_count()} cpus, Python {platform.python_version()}\n")
    print("| backend | files | captures | rows before -> after | store bytes: before / after "
          "raw gc / after durability gc | refs (ours + jj keep) before -> after | objects "
          "before / raw / after | raw gc s | durability gc s |")
    print("|---|---:|---:|---|---|---|---|---:|---:|")
    for r in results:
        b, m, a = r["before"], r["after_raw_gc"], r["after"]
        print(f"| {r['backend']} | {r['files']} | {r['captures']} | {r['rows']['before']} -> "
              f"{r['rows']['after']} | {_mib(b['bytes'])} / {_mib(m['bytes'])} / "
              f"{_mib(a['bytes'])} | {b['refs'] + b['keep_refs']} -> "
              f"{a['refs'] + a['keep_refs']} | {b['objects']} / {m['objects']} / "
              f"{a['objects']} | {r['raw_gc_s']} | {r['durability_gc_s']} |")
    for r in results:
        print(f"{r['backend']}: kept by {r['kept_by']}; captures took {r['capture_s']} s; "
              f"ops abandoned {r['op_log_abandoned']}; {'; '.join(r['notes'])}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=10_000, help="files in the tree")
    parser.add_argument("--captures", type=int, default=2_000, help="captures per backend")
    parser.add_argument("--span-days", type=float, default=60.0,
                        help="the days the captures' recorded times span")
    parser.add_argument("--hot-files", type=int, default=100,
                        help="the files the edits go to, in turn (an agent's working set)")
    parser.add_argument("--backends", default="git,jj", help="git, jj or both")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="scratch folder (default: a new temporary folder)")
    parser.add_argument("--no-json", action="store_true",
                        help="do not write bench/results/bench_gc.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python bench/bench_gc.py " + " ".join(sys.argv[1:] if argv is None else argv)
    root = Path(args.workdir or tempfile.mkdtemp(prefix="bench-gc-"))
    root.mkdir(parents=True, exist_ok=True)
    bench = Bench(root)
    os.environ.update({k: v for k, v in bench.env.items() if k.startswith("GIT_CONFIG")})
    results = [measure(bench, b, args.files, args.captures, args.span_days, args.hot_files)
               for b in args.backends.split(",") if b]
    print_report(command.strip(), results)
    if not args.no_json:
        RESULTS.mkdir(exist_ok=True)
        data = {"command": command.strip(), "platform": platform.platform(), "results": results}
        (RESULTS / "bench_gc.json").write_text(json.dumps(data, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
