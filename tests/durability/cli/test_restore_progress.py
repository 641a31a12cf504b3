"""A long restore draws click's progress bar on stderr when stderr is a
terminal (a real pseudo-terminal here), and nothing under --json, for a short
restore, or when stderr is a pipe."""

from __future__ import annotations

import os
import pty
import subprocess
import threading
from pathlib import Path

import pytest

from durability.backends.git import forget
from durability.cli.progress import MIN_STEPS
from tests.helpers import durability_exe, make_git_repo, make_jj_repo, run_cli, run_cli_json

RUN = "run-progress"


def _on_a_terminal(*args: str) -> tuple[int, str, bytes]:
    """Run the CLI with stderr on a pseudo-terminal: exit status, stdout, and
    what reached the terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([durability_exe(), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen: list[bytes] = []

    def drain() -> None:
        # Read while it runs: a full terminal buffer would block the bar.
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return  # EIO: the command closed the terminal
            if not data:
                return
            seen.append(data)

    reader = threading.Thread(target=drain, name="pty-drain")
    reader.start()
    try:
        assert proc.stdout is not None
        out = proc.stdout.read().decode()
        status = proc.wait(timeout=300)
    finally:
        reader.join(60)
        os.close(master)
        if proc.stdout is not None:
            proc.stdout.close()
    return status, out, b"".join(seen)


@pytest.fixture(params=["jj", "git"])
def many(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A repository whose seq 1 differs from the tree now in MIN_STEPS + 100 files."""
    repo = (make_jj_repo(tmp_path / "repo") if request.param == "jj"
            else make_git_repo(tmp_path / "repo")).resolve()
    request.addfinalizer(lambda: forget(repo))
    (repo / "many").mkdir()
    for i in range(MIN_STEPS + 100):
        (repo / "many" / f"f{i:04}.txt").write_text(f"file {i}\n")
    run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    for i in range(MIN_STEPS + 100):
        (repo / "many" / f"f{i:04}.txt").write_text(f"changed {i}\n")
    return repo


def test_a_long_restore_draws_a_bar_on_a_terminal(many: Path) -> None:
    status, out, terminal = _on_a_terminal("restore", RUN, "--node", "n", "--seq", "1")
    assert status == 0, terminal
    assert out.startswith(f"restored {many} to seq 1 (") and f"{MIN_STEPS + 100} written" in out
    assert b"restoring" in terminal and f"{MIN_STEPS + 100}/{MIN_STEPS + 100}".encode() in terminal
    assert b"100%" in terminal
    assert (many / "many" / "f0000.txt").read_text() == "file 0\n"


def test_json_and_a_pipe_stay_quiet(many: Path) -> None:
    status, out, terminal = _on_a_terminal("restore", RUN, "--node", "n", "--seq", "1",
                                           "--json")
    assert status == 0 and terminal == b""
    assert out.startswith("{")
    # A pipe: undo (a restore of as many files) says nothing on stderr.
    done = run_cli("restore", RUN, "--node", "n", "--seq", "2")
    assert done.returncode == 0 and done.stderr == ""
    assert (many / "many" / "f0000.txt").read_text() == "changed 0\n"


def test_a_short_restore_draws_nothing(many: Path) -> None:
    status, _, terminal = _on_a_terminal("restore", RUN, "--node", "n", "--seq", "1",
                                         "--path", "many/f0001.txt")
    assert status == 0 and terminal == b""
    assert (many / "many" / "f0001.txt").read_text() == "file 1\n"
