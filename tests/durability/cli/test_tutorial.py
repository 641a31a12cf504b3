"""docs/tutorial/first-session.md works as written: its ``sh`` blocks, run in
order in one shell in an empty folder with the installed ``durability`` on
PATH, succeed, and the restore and its undo leave the files the page says."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from tests.helpers import VENV_BIN

TUTORIAL = Path(__file__).resolve().parents[3] / "docs" / "tutorial" / "first-session.md"


def runnable_blocks(page: str) -> list[str]:
    """The ``sh`` fenced blocks, in order (``shell`` and ``text`` blocks are shown only)."""
    return re.findall(r"^```sh\n(.*?)^```$", page, re.S | re.M)


def test_the_tutorial_runs_as_written(tmp_path: Path) -> None:
    blocks = runnable_blocks(TUTORIAL.read_text())
    steps = "".join(f"echo '### block {n}'\n{block}" for n, block in enumerate(blocks))
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-eu", "-o", "pipefail", "-c", steps], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    # install-hook wrote the project hook, doctor found nothing failing.
    assert "snapshot-hook installed in" in out and "\nfail " not in out
    # The restore put seq 1's file back, and the undo seq 2's; the log had both calls.
    log, restore, undo = (out.split(f"### block {n}\n")[1].split("### block")[0]
                          for n in (3, 4, 5))
    assert log.count("Write app.py") == 2
    assert restore.endswith('print("hello, world")\n')
    assert undo.endswith('print("broken")\n')
    assert (tmp_path / "try-durability" / "app.py").read_text() == 'print("broken")\n'
    # The undo the page runs is the one its restore printed.
    printed = re.search(r"undo: (durability restore .*)", restore)
    assert printed is not None and printed.group(1) in blocks[5]
    # Clean up removed the hook.
    settings = tmp_path / "try-durability" / ".claude" / "settings.json"
    assert "snapshot-hook" not in settings.read_text() and "run-hook.sh" not in settings.read_text()


def test_shown_blocks_are_not_run() -> None:
    page = "```shell\nclaude\n```\n```sh\necho one\n```\n```text\nout\n```\n```sh\necho two\n```\n"
    assert runnable_blocks(page) == ["echo one\n", "echo two\n"]
