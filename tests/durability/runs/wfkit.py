"""Workflow files for the engine's tests, and in-process gates the tasks of
in-process runs wait on (the tests and the tasks share this module)."""

from __future__ import annotations

import textwrap
import threading
from collections import defaultdict
from pathlib import Path

from durability.store.clock import ManualClock

#: Named events a task waits on and the test sets.
GATES: defaultdict[str, threading.Event] = defaultdict(threading.Event)
#: (node_id, iteration, attempt) of every task execution, in order.
CALLS: list[tuple[str, int, int]] = []
CLOCK = ManualClock(1_000_000_000_000)

HEADER = """\
from __future__ import annotations

from pydantic import BaseModel

from durability.runs.workflow import Workflow
from durability.runs.budget import Limits
from tests.durability.runs import wfkit
"""


def reset() -> None:
    GATES.clear()
    CALLS.clear()
    CLOCK.set(1_000_000_000_000)


def write(folder: Path, body: str, name: str = "wf.py") -> Path:
    """A workflow file made of the standard header and ``body``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(HEADER + textwrap.dedent(body))
    return path


# A chain of four tasks that write to a jj worktree, checkpoint through the
# snapshot code with the attempt's own environment, then leave an
# uncheckpointed ``.partial`` file for a while (where a kill hurts most).
# Every step is logged to side.log, next to the file, outside the worktree.
CHAIN = """\
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from pydantic import BaseModel

from durability.config import Settings
from durability.capture.snapshot import snapshot_now
from durability.runs.workflow import Workflow

SIDE = Path(__file__).with_name("side.log")
workflow = Workflow("chain")


class Out(BaseModel):
    node: str
    value: int


def log(*parts: object) -> None:
    with SIDE.open("a") as f:
        f.write(" ".join(str(p) for p in parts) + "\\n")
        f.flush()
        os.fsync(f.fileno())


def make(node: str, deps: list[str]) -> None:
    @workflow.task(node, deps=deps, output=Out)
    def task(ctx):
        wt = Path(ctx.worktree)
        partial = sorted(p.name for p in wt.glob("*.partial"))
        log("start", node, ctx.attempt, ",".join(partial) or "-")
        value = sum(ctx.inputs[d].value for d in deps) + len(node) * 10
        (wt / f"{node}.txt").write_text(f"{node}={value}\\n")
        snapshot_now(Settings.from_env(ctx.env), key=ctx.key, path=wt, source="wrap",
                     request_id=str(uuid.uuid4()), label=node)
        log("checkpointed", node, ctx.attempt)
        (wt / f"{node}.partial").write_text("half-done\\n")
        time.sleep(0.15)
        (wt / f"{node}.partial").unlink()
        log("done", node, ctx.attempt)
        return Out(node=node, value=value)


make("t1", [])
make("t2", ["t1"])
make("t3", ["t2"])
make("t4", ["t3"])
"""


def side_lines(folder: Path) -> list[list[str]]:
    path = folder / "side.log"
    return [ln.split() for ln in path.read_text().splitlines()] if path.exists() else []


def starts(folder: Path, node: str) -> int:
    return sum(1 for ln in side_lines(folder) if ln[:2] == ["start", node])
