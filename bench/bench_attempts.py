"""What attempts checkpointing themselves costs (docs/how-to/runs.md, "Attempts
checkpoint themselves").

Runs a workflow of N tasks, each writing one file into a jj (or git)
worktree, in this process, once with the engine's checkpoints and once with
``checkpoints=False`` on every task, alternating, and prints the extra time
per attempt (the engine step with checkpoints against one without) beside
the raw ``jj util snapshot`` (or ``git add -A`` + ``git write-tree`` with a
private index) measured in the same run (a start and an end capture cost at
least two of those).  Without ``--service`` no snapshot service runs (the
attempt's watch is in process); with it, a private service is started first
and the attempt's captures and watch go through it.  Nothing here asserts a
speed.

    .venv/bin/python bench/bench_attempts.py --tasks 8 --reps 3
    .venv/bin/python bench/bench_attempts.py --backend git --service --tasks 20 --reps 5
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.benchkit import find_tool

WORKFLOW = """\
from __future__ import annotations

from pathlib import Path

from durability.runs.workflow import Workflow

workflow = Workflow("bench")


def make(i):
    @workflow.task(f"t{i}", deps=[f"t{i - 1}"] if i else [], checkpoints=CHECKPOINTS)
    def task(ctx):
        Path(ctx.worktree, f"f{i}.txt").write_text(f"{i}\\n")
        return {"i": i}


for i in range(TASKS):
    make(i)
"""


def _run_once(root: Path, jj: str, tasks: int, checkpoints: bool, rep: int,
              backend: str) -> float:
    from durability.config import Settings
    from durability.runs.execute import EngineConfig, start_run
    from durability.runs.run_rows import Runs
    from durability.worktree_ops.ops import DurabilityOps

    case = root / f"{'on' if checkpoints else 'off'}-{rep}"
    repo = case / "repo"
    repo.mkdir(parents=True)
    _init(repo, jj, backend)
    (repo / "README.md").write_text("bench\n")
    wf = case / "wf.py"
    wf.write_text(textwrap.dedent(WORKFLOW).replace("CHECKPOINTS", repr(checkpoints))
                  .replace("TASKS", str(tasks)))
    settings = Settings.from_env()
    with Runs(settings.database) as runs:
        started = time.perf_counter()
        outcome = start_run(runs, wf, config=EngineConfig(ops=DurabilityOps(settings)),
                            run_id=f"bench-{case.name}", worktree=str(repo))
        elapsed = time.perf_counter() - started
    if outcome.state != "finished":
        sys.exit(f"bench: the run ended {outcome.state}: {outcome.error}")
    return elapsed


def _init(repo: Path, jj: str, backend: str) -> None:
    if backend == "jj":
        subprocess.run([jj, "git", "init", "--colocate", str(repo)], check=True,
                       capture_output=True)
    else:
        subprocess.run(["git", "init", "-q", str(repo)], check=True)


def _raw_snapshot(root: Path, jj: str, reps: int, backend: str) -> float:
    repo = root / "raw"
    _init(repo, jj, backend)
    env = {**os.environ, "GIT_INDEX_FILE": str(root / "raw-index")}
    times = []
    for i in range(reps):
        (repo / f"r{i}.txt").write_text(f"{i}\n")
        started = time.perf_counter()
        if backend == "jj":
            subprocess.run([jj, "util", "snapshot"], cwd=repo, check=True, capture_output=True)
        else:
            subprocess.run(["git", "add", "-A"], cwd=repo, check=True, env=env)
            subprocess.run(["git", "write-tree"], cwd=repo, check=True, env=env,
                           capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--backend", choices=("jj", "git"), default="jj")
    parser.add_argument("--service", action="store_true",
                        help="through a private snapshot service (started here)")
    args = parser.parse_args()
    jj = find_tool("jj")
    with tempfile.TemporaryDirectory(prefix="bench-attempts-") as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        (home / "jj.toml").write_text('[user]\nname = "Bench"\nemail = "bench@example.invalid"\n')
        os.environ.update({"DURABILITY_HOME": str(root / "state"),
                           "DURABILITY_SOCKET": str(root / "s.sock"),
                           "DURABILITY_SPOOL_DIR": str(root / "spool"),
                           "DURABILITY_BACKEND": args.backend,
                           "DURABILITY_JJ": jj, "JJ_CONFIG": str(home / "jj.toml"),
                           "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b.invalid",
                           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b.invalid"})
        service = None
        if args.service:
            started = subprocess.run([find_tool("durability"), "serve", "--detach", "--json"],
                                     check=True, capture_output=True, text=True)
            service = int(json.loads(started.stdout)["pid"])
        on: list[float] = []
        off: list[float] = []
        try:
            for rep in range(args.reps):  # alternating: both see the same machine
                off.append(_run_once(root, jj, args.tasks, False, rep, args.backend))
                on.append(_run_once(root, jj, args.tasks, True, rep, args.backend))
        finally:
            if service is not None:
                os.kill(service, signal.SIGTERM)
        raw = _raw_snapshot(root, jj, max(5, args.reps * 2), args.backend)
    per_attempt = (statistics.median(on) - statistics.median(off)) / args.tasks * 1000
    print(f"backend {args.backend}, {'through the service' if args.service else 'no service'}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"tasks per run                       {args.tasks}")
    print(f"run, checkpoints=False (median)     {statistics.median(off) * 1000:8.0f} ms")
    print(f"run, engine checkpoints (median)    {statistics.median(on) * 1000:8.0f} ms")
    print(f"extra per attempt                   {per_attempt:8.0f} ms")
    print(f"raw {'jj util snapshot' if args.backend == 'jj' else 'git add + write-tree'}"
          f" (median) {raw * 1000:8.0f} ms")
    print(f"extra per attempt / raw snapshot    {per_attempt / (raw * 1000):8.1f} x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
