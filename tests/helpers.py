"""Shared builders for the tests: real jj repositories, the installed CLI,
hook payloads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

VENV_BIN = Path(sys.executable).parent


def jj_path() -> str:
    """The jj the toolkit will use; a test that needs jj fails (never skips)
    when there is none."""
    found = os.environ.get("DURABILITY_JJ") or shutil.which("jj") or str(VENV_BIN / "jj")
    if not os.access(found, os.X_OK):
        pytest.fail("jj is not installed: run `make test` (it installs jj into .venv/bin)")
    return found


def durability_exe() -> str:
    exe = VENV_BIN / "durability"
    if not exe.exists():
        pytest.fail("the durability console script is not installed in this venv")
    return str(exe)


def jj(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([jj_path(), "--no-pager", "--color=never", "-R", str(repo), *args],
                          cwd=repo, capture_output=True, text=True, check=check, timeout=120)


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          check=check, timeout=120)


def make_jj_repo(path: Path, *, colocate: bool = True) -> Path:
    """A fresh jj repository at ``path`` (colocated with git by default)."""
    path.mkdir(parents=True, exist_ok=True)
    # jj >= 0.34 colocates by default: say so either way.
    args = ["git", "init", "--colocate" if colocate else "--no-colocate"]
    subprocess.run([jj_path(), *args, str(path)], capture_output=True, text=True, check=True,
                   timeout=120)
    return path


def cli(*args: str, input: str | bytes | None = None, env: Mapping[str, str] | None = None,
        cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the installed ``durability`` command."""
    data = input.encode() if isinstance(input, str) else input
    proc = subprocess.run([durability_exe(), *args], input=data, capture_output=True,
                          env=dict(env) if env is not None else None, cwd=cwd, timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode,
                                       proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def cli_json(*args: str, **kw: Any) -> Any:
    done = cli(*args, "--json", **kw)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def run_cli(*args: str, input: str | bytes | None = None, env: Mapping[str, str] | None = None,
            cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the ``durability`` command in this process: what ``cli`` gives
    (exit status, stdout, stderr), without ~0.3 s of interpreter start-up.

    It calls the installed script's own entry, ``durability.__main__.main``
    (so the hook's early dispatch, the click group and its one-line
    ``durability: <code>: <message>`` error path with the exit status from
    the code table are the ones the command runs), under click's
    ``CliRunner`` isolation: its own stdin, stdout and stderr, and
    ``os.environ`` made exactly ``env`` for the call (as the subprocess
    would see it), in ``cwd``.  Only the teardown skip of the hook (an
    ``os._exit``, which would end pytest) is left out; an exception the
    command does not handle is a traceback on stderr and status 1, as in a
    process.  ``timeout`` is accepted for the same signature and not
    enforced.

    What only a process can show stays with ``cli``: the launcher and the
    script, ``os._exit`` paths, signals, a service process, start-up and
    import budgets, and the tests that run the installed command itself on
    purpose (``INSTALLED_COMMAND_TESTS`` below).
    """
    import durability.__main__ as entry

    del timeout
    if not _run_cli_lock.acquire(blocking=False):
        # The isolation swaps this process's streams and environment: a
        # second call at once would read the first's.  Threads use ``cli``.
        raise RuntimeError("run_cli runs one command at a time; use cli() from threads")
    try:
        return _run_cli(entry, args, input, env, cwd)
    finally:
        _run_cli_lock.release()


_run_cli_lock = threading.Lock()


def _run_cli(entry: Any, args: tuple[str, ...], input: str | bytes | None,
             env: Mapping[str, str] | None, cwd: Path | None) -> subprocess.CompletedProcess[str]:
    import contextlib
    import io
    import traceback

    from click import formatting
    from click.testing import CliRunner

    overlay: dict[str, str | None] = {}
    if env is not None:
        overlay = {name: None for name in os.environ if name not in env}
        overlay.update(env)
    runner = CliRunner()
    with runner.isolation(input=input, env=overlay) as (out, err, _mixed):
        # Help text wraps as in a process whose stdout is a pipe (the
        # isolation forces 80 columns; restored when it ends).
        formatting.FORCED_WIDTH = max(min(_columns(), 80) - 2, 50)
        saved_argv, saved_skip = sys.argv, entry._skip_teardown
        sys.argv = ["durability", *args]
        entry._skip_teardown = lambda code: None
        try:
            with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
                entry.main()
            code = 0
        except SystemExit as exc:
            code = _exit_status(exc.code)
        except Exception:
            traceback.print_exc()
            code = 1
        finally:
            sys.argv, entry._skip_teardown = saved_argv, saved_skip
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(ValueError, OSError):
                    stream.flush()
        assert isinstance(out, io.BytesIO) and isinstance(err, io.BytesIO)
        stdout, stderr = out.getvalue(), err.getvalue()
    return subprocess.CompletedProcess(["durability", *args], code,
                                       stdout.decode("utf-8", "replace"),
                                       stderr.decode("utf-8", "replace"))


def _columns() -> int:
    """The width ``shutil.get_terminal_size`` gives a process without a terminal."""
    try:
        return int(os.environ.get("COLUMNS", "")) or 80
    except ValueError:
        return 80


def _exit_status(code: object) -> int:
    """The status a process leaves with for ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


#: Tests that run the installed ``durability`` command on purpose, because
#: only a process shows what they check (the rest call ``run_cli``).  Runs
#: and resumes of a workflow stay processes too, wherever they are: a run
#: is owned by its process, and an in-process owner never dies.
INSTALLED_COMMAND_TESTS = (
    # The in-process runner answers as the installed command does.
    "tests/durability/cli/test_inprocess_runner.py::test_run_cli_answers_as_the_installed_command",
    # The launcher script starts and answers.
    "tests/durability/cli/test_main.py::test_version_and_help_succeed",
    # ``serve`` is a service process, with its own signal handlers.
    "tests/durability/cli/test_exit_codes.py::test_service_running_exits_4",
    # Colour on a terminal: a pty.
    "tests/durability/cli/test_inspect.py::test_diff_is_coloured_on_a_terminal_unless_no_color",
    # One capture as Claude Code makes it: the installed hook, the service.
    "tests/durability/hook/test_entry.py::test_post_tool_use_through_the_service",
    # The hook's budget: its watchdog ends the process with os._exit.
    "tests/durability/hook/test_entry.py::test_hanging_jj_is_bounded_by_the_hook_budget",
    "tests/durability/hook/test_entry.py::test_wedged_service_is_bounded_by_the_hook_budget",
    # The hook's import budget, counted in a fresh interpreter.
    "tests/durability/hook/test_entry.py::test_fast_path_imports_only_the_standard_library",
    # The C stack and memory of a process hold for nested and huge input.
    "tests/durability/hook/test_fuzz.py::test_deeply_nested",
    "tests/durability/hook/test_fuzz.py::test_huge_input",
    # The service a first hook call starts is a process of its own.
    "tests/durability/hook/test_autostart.py::test_sixteen_first_calls_start_one_service_then_use_it",
)


def run_cli_json(*args: str, **kw: Any) -> Any:
    """``cli_json`` in this process (``run_cli``)."""
    done = run_cli(*args, "--json", **kw)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def hook_payload(cwd: Path, *, session_id: str = "sess-1", tool_use_id: str = "toolu_1",
                 tool_name: str = "Write", file_path: str | None = None,
                 event: str = "PostToolUse", **extra: Any) -> dict[str, Any]:
    """A payload shaped like Claude Code's PostToolUse hook input."""
    tool_input: dict[str, Any] = {}
    if file_path is not None:
        tool_input = {"file_path": file_path, "content": "x"}
    elif tool_name == "Bash":
        tool_input = {"command": "true", "description": "run"}
    return {
        "session_id": session_id,
        "transcript_path": str(cwd / ".claude-transcript.jsonl"),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        "tool_name": tool_name,
        "tool_input": tool_input,
        "tool_response": {"success": True},
        "tool_use_id": tool_use_id,
        **extra,
    }


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.02) -> Any:
    """Poll until ``predicate`` returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"condition not met within {timeout}s")


def ping(socket_path: Path, timeout: float = 5.0) -> dict[str, Any] | None:
    """The service's answer to a ping on ``socket_path``, or None when nothing answers."""
    from durability.ground import client
    from durability.ground.errors import ServiceTimeout, ServiceUnreachable

    try:
        answer = client.call(socket_path, {"v": 1, "op": "ping"}, timeout_s=timeout)
    except (ServiceUnreachable, ServiceTimeout):
        return None
    return answer if answer.get("ok") else None


class ServiceProcess:
    """A ``durability serve`` subprocess (foreground), stopped with SIGTERM."""

    def __init__(self, socket_path: Path, log_path: Path, *args: str,
                 env: Mapping[str, str] | None = None) -> None:
        self.socket_path = socket_path
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([durability_exe(), "serve", *args],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         env=dict(env) if env is not None else None)

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                pytest.fail(f"service exited {self.proc.returncode}: {self.log()}")
            return ping(self.socket_path, timeout=2)

        answer: dict[str, Any] = wait_for(ready, timeout=timeout, interval=0.05)
        return answer

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then wait; SIGKILL only if it does not stop in time."""
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
            pytest.fail(f"service did not stop on SIGTERM within {timeout}s; its log ends:\n"
                        f"{self.log()[-3000:]}")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def start_service(tmp_path: Path, *args: str, socket_path: Path | None = None,
                  env: Mapping[str, str] | None = None) -> ServiceProcess:
    """Start ``durability serve`` on ``$DURABILITY_SOCKET`` (or ``socket_path``) and
    wait until it answers a ping."""
    sock = socket_path or Path((env or os.environ)["DURABILITY_SOCKET"])
    extra = ("--socket", str(sock)) if socket_path is not None else ()
    service = ServiceProcess(sock, tmp_path / f"service-{time.monotonic_ns()}.log", *extra, *args,
                             env=env)
    try:
        service.wait_ready()
    except BaseException:
        service.kill()
        raise
    return service


# -- jj stand-ins and tree comparison (capture, restore, crash tests) -------

_GATED_JJ = """#!/bin/sh
# Test stand-in: runs the real jj, but waits while {gate} exists.
[ "$1" = "--version" ] && exec {real} "$@"
gated=1
if [ -n "{only}" ]; then
  gated=0
  for a in "$@"; do [ "$a" = "{only}" ] && gated=1; done
fi
wait_gate() {{
  if [ "$gated" = 1 ] && [ -e {gate} ]; then
    echo $$ >> {started}
    while [ -e {gate} ]; do sleep 0.02; done
  fi
}}
if [ "{when}" = after ]; then
  {real} "$@"; rc=$?
  wait_gate
  exit $rc
fi
wait_gate
exec {real} "$@"
"""


def write_script(path: Path, text: str) -> Path:
    """An executable script (a stand-in program for a test)."""
    path.write_text(text)
    path.chmod(0o755)
    return path


class GatedJj:
    """A ``DURABILITY_JJ`` that runs the real jj but holds each call while a
    gate file exists, so a test can act *during* a capture.

    ``when="before"``: the call waits before jj starts (the tree is not yet
    read); ``"after"``: jj has run (the snapshot is taken) and the call waits
    before returning.  ``only``: gate only calls with this jj subcommand.
    """

    def __init__(self, folder: Path, *, when: str = "before", only: str = "") -> None:
        import shlex

        folder.mkdir(parents=True, exist_ok=True)
        self.gate = folder / "gate"
        self.started = folder / "started"
        self.path = write_script(folder / "jj", _GATED_JJ.format(
            real=shlex.quote(jj_path()), gate=shlex.quote(str(self.gate)),
            started=shlex.quote(str(self.started)), when=when, only=only))

    def close(self) -> None:
        self.gate.touch()

    def open(self) -> None:
        self.gate.unlink(missing_ok=True)

    def held(self) -> list[int]:
        """Pids of the calls that have reached the gate so far."""
        if not self.started.exists():
            return []
        return [int(x) for x in self.started.read_text().split()]

    def wait_held(self, count: int = 1, timeout: float = 60.0) -> list[int]:
        return list(wait_for(lambda: len(self.held()) >= count and self.held(),
                             timeout=timeout))


def tree_manifest(root: Path) -> dict[str, tuple[str, bool, bytes]]:
    """Every file and symlink under ``root`` except ``.jj`` and ``.git``:
    path -> (kind, executable, bytes or link target)."""
    found: dict[str, tuple[str, bool, bytes]] = {}

    def walk(folder: Path, prefix: str) -> None:
        for entry in os.scandir(folder):
            rel = prefix + entry.name
            if rel in (".jj", ".git"):
                continue
            if entry.is_symlink():
                found[rel] = ("link", False, os.fsencode(os.readlink(entry.path)))
            elif entry.is_dir():
                walk(Path(entry.path), rel + "/")
            else:
                st = entry.stat(follow_symlinks=False)
                found[rel] = ("file", bool(st.st_mode & 0o100), Path(entry.path).read_bytes())

    walk(root, "")
    return found


def commit_manifest(worktree: Path, commit_id: str) -> dict[str, tuple[str, bool, bytes]]:
    """The same manifest, read from a commit in the worktree's git store
    (the one behind jj, or a plain git worktree's own)."""
    import pygit2

    from durability.backends.jj import git_dir

    repo = (pygit2.Repository(str(git_dir(worktree))) if (worktree / ".jj").is_dir()
            else checkpoints(worktree))
    found: dict[str, tuple[str, bool, bytes]] = {}

    def walk(tree: Any, prefix: str) -> None:
        for entry in tree:
            rel = prefix + entry.name
            if entry.filemode == pygit2.GIT_FILEMODE_TREE:
                walk(repo[entry.id], rel + "/")
            elif entry.filemode == pygit2.GIT_FILEMODE_LINK:
                found[rel] = ("link", False, repo[entry.id].data)
            else:
                executable = entry.filemode == pygit2.GIT_FILEMODE_BLOB_EXECUTABLE
                found[rel] = ("file", executable, repo[entry.id].data)

    walk(repo[commit_id].peel(pygit2.Commit).tree, "")
    return found


def jj_at(repo: Path) -> str:
    """The commit id of ``@`` as jj last recorded it (no new snapshot)."""
    return jj(repo, "log", "-r", "@", "--no-graph", "-T", "commit_id",
              "--ignore-working-copy").stdout.strip()


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def make_git_repo(path: Path, *, commit: bool = True) -> Path:
    """A plain git repository (no jj) at ``path`` with one committed file, or
    an unborn branch when ``commit`` is false."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    if commit:
        (path / "README.md").write_text("hello\n")
        git(path, "add", "README.md")
        git(path, "commit", "-q", "-m", "init")
    return path


# -- the configured state database (a SQLite file, or PostgreSQL) ----------

def state_database() -> Path | str:
    """The state database the toolkit's settings name: ``$DURABILITY_HOME/state.db``,
    or this test's PostgreSQL schema when the suite runs on PostgreSQL
    (tests/pg.py), so a test reads what the commands it runs wrote."""
    from durability.config import Settings

    return Settings.from_env().database


@contextmanager
def state_write() -> Iterator[Any]:
    """One write transaction on ``state_database()``, for a test that edits
    rows by hand (a record a kill lost, a claim another host holds)."""
    from durability.store.database import open_database
    from durability.store.db import write_transaction

    db = open_database(state_database())
    try:
        with write_transaction(db) as conn:
            yield conn
    finally:
        db.close()


def git_add_all_tree(worktree: Path, index_file: Path) -> str:
    """What ``git add -A && git write-tree`` gives with a private index."""
    env = {**os.environ, "GIT_INDEX_FILE": str(index_file)}
    subprocess.run(["git", "-C", str(worktree), "add", "-A"], env=env, check=True,
                   capture_output=True, timeout=120)
    done = subprocess.run(["git", "-C", str(worktree), "write-tree"], env=env, check=True,
                          capture_output=True, text=True, timeout=120)
    return done.stdout.strip()


def checkpoints(worktree: Path) -> Any:
    """The git repository holding ``worktree``'s checkpoints, as the toolkit
    opens it: a git worktree's private checkpoint store (decision 0049), the
    git store behind jj for a jj working copy."""
    from durability.backends import backend_name
    from durability.backends.base import backend_type

    return backend_type(backend_name(Path(worktree))).checkpoint_repository(Path(worktree))


def store_git(worktree: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """git run in the repository that holds ``worktree``'s checkpoints."""
    return subprocess.run(["git", "--git-dir", str(checkpoints(worktree).path), *args],
                          capture_output=True, text=True, check=check, timeout=120)
