"""Fuzz the hook (contract 6, issue 8): arbitrary bytes, JSON with
lone surrogates and paths that are not UTF-8, huge and deeply nested input.

Every run must exit 0 within its budget, print nothing on stdout, and leave
exactly one record: a checkpoint, or one gap (in any spool folder or the
store), never both and never none.  No service runs, so a usable payload is
captured in process, the slowest path.  Examples are few and derandomized:
CI must see the same inputs every time.  Arbitrary bytes and odd JSON run
the command's entry in this process (``run_cli``); the deeply nested and
huge inputs run the installed command, where only a process shows that
the C stack and memory hold.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from durability.gaps import spool
from tests.helpers import durability_exe, make_git_repo, run_cli

# About the SQLite file itself: stays on SQLite when the suite runs on PostgreSQL.
pytestmark = pytest.mark.sqlite_file

BUDGET_MS = 5000
# Beyond the budget: interpreter start and exit, on a loaded machine.  The hook
# enforces the budget itself; this only turns a hang into a failure.
HANG_GUARD_S = BUDGET_MS / 1000 + 5

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.data_too_large])

# Text with lone surrogates mixed in (hypothesis leaves them out by default).
_SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
TEXT = st.text(st.one_of(st.characters(), _SURROGATE), max_size=40)
IDS = st.one_of(st.sampled_from(["sess-1", "s_2", "a:b@c", "x" * 200]), TEXT)


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two git worktrees: one at a plain path, one at a path that is not UTF-8."""
    base = tmp_path_factory.mktemp("fuzz")
    plain = make_git_repo(base / "plain")
    odd = make_git_repo(Path(os.fsdecode(os.fsencode(base) + b"/odd\xff")))
    return [str(plain), str(odd)]


def _cwds(repos: list[str]) -> st.SearchStrategy[Any]:
    # Half of them a real worktree, so checkpoints are fuzzed as well as gaps.
    return st.one_of(st.sampled_from(repos), st.one_of(
        st.sampled_from(repos).map(lambda r: r + "/missing"),
        st.sampled_from(repos).map(lambda r: r + "\ud800"),
        st.sampled_from(["/nonexistent", "relative/path", "", "/"]),
        TEXT, st.integers(), st.none(),
    ))


def _payloads(repos: list[str]) -> st.SearchStrategy[bytes]:
    fields = st.fixed_dictionaries(
        {"session_id": IDS, "cwd": _cwds(repos)},
        optional={
            "tool_use_id": st.one_of(TEXT, st.integers()),
            "hook_event_name": st.sampled_from(["PostToolUse", "AfterTool", "x"]),
            "tool_name": st.one_of(st.sampled_from(["Write", "Bash"]), TEXT),
            "tool_input": st.dictionaries(st.sampled_from(["file_path", "path", "command"]),
                                          st.one_of(TEXT, st.sampled_from(repos))),
            "turn_id": TEXT,
            "timestamp": TEXT,
        },
    )
    # ASCII JSON: every surrogate is sent as a \\udXXX escape.
    return fields.map(lambda d: json.dumps(d).encode("ascii"))


def _run_hook(tmp_path: Path, data: bytes, *, process: bool = False) -> tuple[int, int]:
    """Run the hook on ``data`` in a fresh state (in this process, or with
    ``process`` the installed command); (checkpoints, gaps) it left."""
    with tempfile.TemporaryDirectory(dir=tmp_path) as fresh:
        home, spool_dir = Path(fresh) / "state", Path(fresh) / "spool"
        env = {**os.environ, "DURABILITY_HOME": str(home),
               "DURABILITY_SPOOL_DIR": str(spool_dir),
               "DURABILITY_SOCKET": str(Path(fresh) / "none.sock"),
               "DURABILITY_HOOK_TIMEOUT_MS": str(BUDGET_MS)}
        start = time.monotonic()
        if process:
            ran = subprocess.run([durability_exe(), "snapshot-hook"], input=data,
                                 capture_output=True, env=env, timeout=HANG_GUARD_S)
            done = subprocess.CompletedProcess(ran.args, ran.returncode,
                                               ran.stdout.decode("utf-8", "replace"),
                                               ran.stderr.decode("utf-8", "replace"))
        else:
            done = run_cli("snapshot-hook", input=data, env=env)
        ELAPSED.append(time.monotonic() - start)
        assert ELAPSED[-1] < HANG_GUARD_S, ELAPSED[-1]
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""
        assert "Traceback" not in done.stderr, done.stderr
        return _records(home, [spool_dir, home / "spool"])


ELAPSED: list[float] = []


def _records(home: Path, folders: list[Path]) -> tuple[int, int]:
    checkpoints = 0
    gap_ids: set[str] = set()
    if (home / "state.db").exists():
        with sqlite3.connect(home / "state.db") as db:
            checkpoints = db.execute("SELECT count(*) FROM workspace_checkpoints").fetchone()[0]
            gap_ids |= {str(r[0]) for r in db.execute("SELECT request_id FROM gaps")}
        db.close()
    for folder in folders:
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            read = spool.read_spool(path)
            assert read.torn == 0
            gap_ids |= {r["request_id"] for r in read.records}
    return checkpoints, len(gap_ids)


def _one_record(found: tuple[int, int]) -> None:
    assert found in {(1, 0), (0, 1)}, f"checkpoints, gaps = {found}"
    event("checkpoint" if found == (1, 0) else "gap")  # --hypothesis-show-statistics


@FUZZ
@given(data=st.binary(max_size=4096))
def test_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    _one_record(_run_hook(tmp_path, data))


@pytest.mark.slow
@FUZZ
@given(data=st.data())
def test_json_with_surrogates_and_odd_paths(
    tmp_path: Path, repos: list[str], data: st.DataObject
) -> None:
    _one_record(_run_hook(tmp_path, data.draw(_payloads(repos))))


@settings(FUZZ, max_examples=10)
@given(depth=st.integers(1, 300_000), opener=st.sampled_from([b"[", b'{"a":']),
       closed=st.booleans())
def test_deeply_nested(tmp_path: Path, depth: int, opener: bytes, closed: bool) -> None:
    closer = b"]" if opener == b"[" else b"}"
    body = opener * depth + (b"1" + closer * depth if closed else b"")
    _one_record(_run_hook(tmp_path, b'{"session_id":"sess-1","x":' + body + b"}",
                          process=True))


@pytest.mark.parametrize("size_mb", [4, 17])
def test_huge_input(tmp_path: Path, repos: list[str], size_mb: int) -> None:
    # 4 MiB is read and captured; past the 16 MiB cap it is a bad-hook-input gap.
    payload = {"session_id": "sess-1", "cwd": repos[0], "tool_use_id": "t1",
               "tool_name": "Read", "tool_response": "x" * (size_mb << 20)}
    found = _run_hook(tmp_path, json.dumps(payload).encode(), process=True)
    assert found == ((1, 0) if size_mb < 16 else (0, 1))
