"""Progress for the long operations besides restore: a capture (``snapshot``)
draws a spinner on a terminal once it has run for ``SPINNER_DELAY_S``, and
``diff`` over many files draws click's bar while it compares them.  Both stay
silent when stderr is a pipe and under ``--json`` (stderr on a real
pseudo-terminal here); ``log`` reports each checkpoint it compares."""

from __future__ import annotations

import os
import pty
import shlex
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from durability.backends.git import forget
from durability.cli.progress import MIN_STEPS
from durability.config import Settings
from durability.inspect.timeline import timeline
from durability.store import Store
from tests.helpers import (
    durability_exe,
    jj_path,
    make_git_repo,
    make_jj_repo,
    run_cli,
    run_cli_json,
    write_script,
)

RUN = "run-long"
MANY = MIN_STEPS + 100


def _on_a_terminal(*args: str, env: Mapping[str, str] | None = None
                   ) -> tuple[int, bytes, bytes]:
    """Run the CLI with stderr on a pseudo-terminal: exit status, stdout, and
    what reached the terminal."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([durability_exe(), *args], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=slave,
                            env=dict(env) if env is not None else None)
    os.close(slave)
    seen: list[bytes] = []

    def drain() -> None:
        while True:  # read while it runs: a full terminal buffer would block it
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
        out = proc.stdout.read()
        status = proc.wait(timeout=300)
    finally:
        reader.join(60)
        os.close(master)
        if proc.stdout is not None:
            proc.stdout.close()
    return status, out, b"".join(seen)


def _slow_jj(folder: Path) -> dict[str, str]:
    """An environment whose jj is the real one, each call a second late: a
    capture that certainly outlasts the spinner's delay."""
    folder.mkdir()
    script = write_script(folder / "jj", f"#!/bin/sh\nsleep 1\nexec {shlex.quote(jj_path())} "
                                          '"$@"\n')
    return {**os.environ, "DURABILITY_JJ": str(script)}


def test_a_slow_capture_shows_a_spinner_on_a_terminal(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo").resolve()
    (repo / "a.txt").write_text("a\n")
    env = _slow_jj(tmp_path / "bin")
    status, out, terminal = _on_a_terminal("snapshot", str(repo), "--run", RUN, "--node", "n",
                                           env=env)
    assert status == 0, terminal
    assert out.startswith(b"seq 1 commit ")
    assert f"capturing {repo}".encode() in terminal
    assert b"s\r" in terminal or b"s\n" in terminal or b"s\x1b" in terminal  # seconds spent


@pytest.mark.slow
def test_a_capture_stays_quiet_under_json_and_on_a_pipe(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo").resolve()
    (repo / "a.txt").write_text("a\n")
    env = _slow_jj(tmp_path / "bin")
    status, out, terminal = _on_a_terminal("snapshot", str(repo), "--run", RUN, "--node", "n",
                                           "--json", env=env)
    assert status == 0 and terminal == b"" and out.startswith(b"{")
    (repo / "a.txt").write_text("b\n")
    done = run_cli("snapshot", str(repo), "--run", RUN, "--node", "n", env=env)
    assert done.returncode == 0 and done.stderr == "" and done.stdout.startswith("seq 2 ")


@pytest.fixture(params=["jj", "git"])
def many(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """seq 1 and seq 2 of RUN differ in MANY files."""
    repo = (make_jj_repo(tmp_path / "repo") if request.param == "jj"
            else make_git_repo(tmp_path / "repo")).resolve()
    request.addfinalizer(lambda: forget(repo))
    (repo / "many").mkdir()
    for i in range(MANY):
        (repo / "many" / f"f{i:04}.txt").write_text(f"file {i}\n")
    run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    for i in range(MANY):
        (repo / "many" / f"f{i:04}.txt").write_text(f"changed {i}\n")
    run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    return repo


@pytest.mark.slow
def test_a_diff_of_many_files_draws_a_bar_then_the_whole_diff(many: Path) -> None:
    status, out, terminal = _on_a_terminal("diff", RUN, "--seq", "1", "--to", "2")
    assert status == 0, terminal
    assert b"comparing files" in terminal and f"{MANY}/{MANY}".encode() in terminal
    assert b"100%" in terminal
    assert out.count(b"diff --git ") == MANY and b"+changed 0\n" in out
    assert b"comparing" not in out  # the bar is on stderr only
    status, out, terminal = _on_a_terminal("diff", RUN, "--seq", "1", "--to", "2", "--stat")
    assert status == 0 and f"{MANY}/{MANY}".encode() in terminal
    assert out.decode().endswith(f"{MANY} files changed, +{MANY} -{MANY}\n")


@pytest.mark.slow
def test_a_diff_stays_quiet_under_json_and_on_a_pipe(many: Path) -> None:
    status, out, terminal = _on_a_terminal("diff", RUN, "--seq", "1", "--to", "2", "--json")
    assert status == 0 and terminal == b"" and out.startswith(b"{")
    done = run_cli("diff", RUN, "--seq", "1", "--to", "2", "--name-only")
    assert done.returncode == 0 and done.stderr == ""
    assert len(done.stdout.splitlines()) == MANY


def test_log_reports_each_checkpoint_it_compares(tmp_path: Path, settings: Settings) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    for i in range(3):
        (repo / "a.txt").write_text(f"{i}\n")
        run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    told: list[tuple[int, int]] = []
    with Store(settings.database) as store:
        entries = timeline(store, repo, progress=lambda done, total: told.append((done, total)))
    assert len(entries) == 3 and told == [(1, 3), (2, 3), (3, 3)]
    forget(repo)
