"""Workflow files for the isolated-worktree and fork tests: tasks that log
what they saw to ``side.log`` (next to the workflow, outside the worktree)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.helpers import make_git_repo, make_jj_repo

HEADER = '''\
from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.runs.workflow import Workflow

HERE = Path(__file__).parent
SIDE = HERE / "side.log"


def log(**fields):
    with SIDE.open("a") as f:
        f.write(json.dumps(fields) + "\\n")
        f.flush()
        os.fsync(f.fileno())


def files(ctx):
    return sorted(p.name for p in Path(ctx.worktree).iterdir() if p.is_file() and p.name != ".git")


def checkpoint(ctx, label):
    snapshot_now(Settings.from_env(ctx.env), key=ctx.key, path=Path(ctx.worktree),
                 source="wrap", request_id=str(uuid.uuid4()), label=label)


def meet(name, other):
    """Say this task started and wait (up to 60 s) until ``other`` has too:
    proof that the two ran at once."""
    (HERE / f"{name}.started").touch()
    deadline = time.monotonic() + 60
    while not (HERE / f"{other}.started").exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{other} never started beside {name}")
        time.sleep(0.01)
'''


def write(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "wf.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def side(folder: Path) -> list[dict[str, object]]:
    import json

    path = folder / "side.log"
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


def make_repo(path: Path, backend: str) -> Path:
    """A jj (colocated) or plain git repository holding a committed README."""
    if backend == "git":
        return make_git_repo(path)
    repo = make_jj_repo(path)
    (repo / "README.md").write_text("hello\n")
    return repo
