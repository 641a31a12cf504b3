"""Cross-cutting cases found by an acceptance pass from the outside: the
installed CLI as a new user runs it."""

from __future__ import annotations

from pathlib import Path

from tests.helpers import cli

FAILING_WORKFLOW = """\
from engine.workflow import Workflow

workflow = Workflow("fails")


@workflow.task()
def broken(ctx):
    raise ValueError("first line\\nsecond line\\n\\nthird line")
"""


def test_a_multi_line_task_error_is_one_line_on_stderr(tmp_path: Path) -> None:
    wf = tmp_path / "wf.py"
    wf.write_text(FAILING_WORKFLOW)
    done = cli("run", str(wf), "--run-id", "ml-1", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("durability: TASK_FAILED: ValueError: first line")
    assert "second line" in done.stderr and "third line" in done.stderr
