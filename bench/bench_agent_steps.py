"""What the engine adds per step (docs/how-to/agents.md, "What it costs").

Two pairs, each measured in the same run, interleaved, medians of --reps:

* ``python``: a workflow of N trivial chained Python tasks run by the engine
  (SQLite store, no worktree actions) against a bare loop calling the same
  N functions: the engine's per-task overhead (claims, attempt rows,
  scheduling, output validation).
* ``agent``: M one-line agent tasks (a tiny agent process printing a
  session line, one usage line and its result) run by the engine against
  a bare loop starting the same process M times and reading its stdout: the
  agent task's per-invocation overhead (process group, watchdog, event
  rows, budget folding, answer validation).

Nothing here asserts a speed.

    .venv/bin/python bench/bench_agent_steps.py --tasks 100 --agents 20 --reps 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durability.agents.protocol import AgentRequest, Event, Final, Usage
from durability.runs.agent import AgentConfig, register_harness
from durability.runs.execute import EngineConfig, start_run
from durability.runs.run_rows import Runs

AGENT = ("import json; s='s-1'; print(json.dumps({'t': 'session', 'id': s})); "
         "print(json.dumps({'t': 'usage', 'in': 10, 'out': 5})); "
         "print(json.dumps({'t': 'result', 'v': {'n': 1}, 'id': s}))")

PY_WF = """
from durability.runs.workflow import Workflow
workflow = Workflow("bench")
def make(i, deps):
    @workflow.task(f"t{i}", deps=deps)
    def task(ctx):
        return {"n": i}
for i in range(COUNT):
    make(i, [f"t{i-1}"] if i else [])
"""

AGENT_WF = """
from pydantic import BaseModel
from durability.runs.workflow import Workflow
class Out(BaseModel):
    n: int
workflow = Workflow("bench-agents")
for i in range(COUNT):
    workflow.agent(f"a{i}", prompt="go", harness="tiny", output=Out,
                   deps=[f"a{i-1}"] if i else [])
"""


class Tiny:
    name = "tiny"
    executable = sys.executable

    def argv(self, request: AgentRequest, executable: str) -> list[str]:
        return [executable, "-S", "-c", AGENT]

    def env(self, request: AgentRequest, base: dict[str, str]) -> dict[str, str]:
        return base

    def stdin(self, request: AgentRequest) -> bytes | None:
        return None

    def prepare(self, request: AgentRequest) -> None:
        pass

    def parse(self, line: str) -> list[Event]:
        raw = json.loads(line)
        if raw["t"] == "session":
            return [Event("session", session_id=raw["id"])]
        if raw["t"] == "usage":
            return [Event("usage", usage=Usage("m", raw["in"], raw["out"], cost_usd=0.0))]
        return [Event("result", session_id=raw["id"], raw=raw)]

    def finish(self, events: list[Event], returncode: int, stderr_head: str) -> Final:
        raw: Any = next(e.raw for e in events if e.kind == "result")
        return Final(returncode == 0, raw["id"], structured=raw["v"])


def bare_python(n: int) -> float:
    start = time.perf_counter()
    outputs: list[Any] = []
    for i in range(n):
        outputs.append(json.dumps({"n": i}))
    return time.perf_counter() - start


def bare_agents(m: int) -> float:
    start = time.perf_counter()
    for _ in range(m):
        proc = subprocess.Popen([sys.executable, "-S", "-c", AGENT], stdout=subprocess.PIPE,
                                text=True, start_new_session=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            json.loads(line)
        proc.wait()
    return time.perf_counter() - start


def engine(folder: Path, body: str, run_id: str) -> float:
    path = folder / f"{run_id}.py"
    path.write_text(body)
    (folder / "wt").mkdir(exist_ok=True)
    config = EngineConfig(agents=AgentConfig(private_root=folder / "private"))
    with Runs(folder / f"{run_id}.db") as runs:
        start = time.perf_counter()
        outcome = start_run(runs, path, config=config, run_id=run_id,
                            worktree=str(folder / "wt"))
        took = time.perf_counter() - start
    assert outcome.state == "finished", outcome
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    register_harness("tiny", Tiny)
    rows: dict[str, list[float]] = {k: [] for k in ("py", "bare_py", "ag", "bare_ag")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for rep in range(args.reps):
            rows["bare_py"].append(bare_python(args.tasks))
            rows["py"].append(engine(folder, PY_WF.replace("COUNT", str(args.tasks)), f"p{rep}"))
            rows["bare_ag"].append(bare_agents(args.agents))
            rows["ag"].append(engine(folder, AGENT_WF.replace("COUNT", str(args.agents)),
                                     f"a{rep}"))
    med = {k: statistics.median(v) for k, v in rows.items()}
    per_py = (med["py"] - med["bare_py"]) / args.tasks * 1000
    per_ag = (med["ag"] - med["bare_ag"]) / args.agents * 1000
    print(f"python tasks: {args.tasks} in {med['py']:.3f}s (bare loop {med['bare_py']*1000:.2f} "
          f"ms): {per_py:.1f} ms per task")
    print(f"agent tasks: {args.agents} in {med['ag']:.3f}s (bare process loop "
          f"{med['bare_ag']:.3f}s): {per_ag:.1f} ms per agent task over the bare process")


if __name__ == "__main__":
    main()
