"""A worktree with a little of everything recorded (two sessions, labels, a
gap, a rename, an engine run, a remote), the CLI's ``--json`` and the MCP
tools' answers over it, and ``shape``: what the wire format pins."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.store import AttemptKey, Gap, Store
from tests.helpers import git, make_git_repo

QUICK = """\
from __future__ import annotations

from durability.runs.workflow import Workflow

workflow = Workflow("quick")


@workflow.task()
def first(ctx):
    return {"n": 1}


@workflow.task(deps=["first"], approval=True)
def gate(ctx):
    return {}
"""


def shape(value: Any) -> Any:
    """The wire format of a JSON value: a dict's keys in order with their
    shapes, a list's distinct element shapes in order of first appearance,
    a scalar's JSON type (``null`` for None: a key that is null is not a key
    that is absent)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        seen: list[Any] = []
        for v in value:
            s = shape(v)
            if s not in seen:
                seen.append(s)
        return seen
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str"}[type(value)]


def text(shapes: Any) -> str:
    """``shapes`` as ordered text: two equal dicts with their keys in
    another order are two formats."""
    return json.dumps(shapes, indent=1)


@contextmanager
def cwd(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run(*args: str, code: int = 0) -> Any:
    """``durability ARGS`` in process (exiting ``code``); its stdout read
    as JSON (one JSON value, or one a line for ``logs``)."""
    from durability.cli.main import cli

    done = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert done.exit_code == code, (args, done.output)
    out = done.stdout
    try:
        return json.loads(out)
    except json.JSONDecodeError:
        return [json.loads(line) for line in out.splitlines()]


def snap(settings: Settings, repo: Path, run_id: str, label: str | None = None) -> None:
    done = snapshot_now(settings, key=AttemptKey(run_id, "session", 0, 1), path=repo,
                        request_id=str(uuid.uuid4()), label=label, source="hook")
    assert done.commit_id is not None


def build(tmp_path: Path) -> tuple[Settings, Path]:
    """A git worktree: session ``ra`` with three checkpoints (the second a
    rename, an edit, a deletion and a binary file; labels on two) and a gap,
    session ``rb`` with one checkpoint, a remote ``backup``."""
    settings = Settings.from_env()
    repo = make_git_repo(tmp_path / "repo").resolve()
    (repo / "a.txt").write_text("one\ntwo\n")
    (repo / "old.txt").write_text("".join(f"line {i}\n" for i in range(20)))
    (repo / "gone.txt").write_text("bye\n")
    snap(settings, repo, "ra", "first")
    (repo / "a.txt").write_text("one\nTWO\nthree\n")
    (repo / "old.txt").rename(repo / "new.txt")
    (repo / "gone.txt").unlink()
    (repo / "data.bin").write_bytes(b"\x00\x01binary\x00")
    snap(settings, repo, "ra")
    (repo / "a.txt").write_text("changed again\n")
    snap(settings, repo, "ra", "third")
    (repo / "b.txt").write_text("b\n")
    snap(settings, repo, "rb")
    with Store(settings.database) as store:
        store.add_gaps([Gap(store_now(), "ra", "req-gap", "jj-failed", node_id="session",
                            iteration=0, attempt=1, worktree=str(repo), source="hook",
                            tool_use_id="toolu_9", detail="jj said no")])
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    return settings, repo


def store_now() -> int:
    from durability.store import now_ms

    return now_ms()
