"""Issue 8 item 6: lone surrogates and paths that are not UTF-8 always leave a
record, and paths are carried without loss through the hook, the wire, the
store and the spool (docs/RELIABILITY.md)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from durability.gaps import spool
from durability.ground import ids
from durability.ground.errors import ProtocolError
from durability.service import protocol
from durability.store import AttemptKey, Gap, NewCheckpoint, Store
from tests.helpers import (
    ServiceProcess,
    cli,
    cli_json,
    durability_exe,
    jj_path,
    make_git_repo,
)

# The bytes 0xff and 0xfe never occur in UTF-8: Python names them \udcff and
# \udcfe (surrogateescape), the form every path takes inside the toolkit.
ODD = b"w\xff\xfe"


def _spooled(spool_dir: Path) -> list[dict[str, Any]]:
    if not spool_dir.is_dir():
        return []
    return [json.loads(line) for f in sorted(spool_dir.iterdir())
            for line in f.read_bytes().splitlines() if line.strip()]


def _odd_repo(tmp_path: Path, backend: str) -> Path:
    """A worktree whose path is not UTF-8 (jj refuses such an argument, so
    it is made from inside)."""
    path = Path(os.fsdecode(os.fsencode(tmp_path) + b"/" + ODD))
    if backend == "git":
        return make_git_repo(path)
    path.mkdir()
    subprocess.run([jj_path(), "git", "init", "--colocate"], cwd=path, check=True,
                   capture_output=True, timeout=120)
    (path / "README.md").write_text("hello\n")
    return path


def _hook_input(cwd: str, tool_use_id: str, file_path: str | None = None) -> bytes:
    payload: dict[str, Any] = {"session_id": "s1", "tool_use_id": tool_use_id, "cwd": cwd,
                               "hook_event_name": "PostToolUse", "tool_name": "Write"}
    if file_path is not None:
        payload["tool_input"] = {"file_path": file_path}
    # ASCII JSON: surrogates become \udcff escapes, as a harness written in
    # Python would send an os.fsdecode()d path.
    return json.dumps(payload).encode("ascii")


@pytest.fixture
def spool_dir() -> Path:
    return Path(os.environ["DURABILITY_SPOOL_DIR"])


# -- ids with lone surrogates ---------------------------------------------------


def test_the_issue_repro_files_exactly_one_gap(tmp_path: Path, spool_dir: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    done = cli("snapshot-hook", input=_hook_input(str(plain), "ab\ud800"))
    assert done.returncode == 0 and done.stdout == ""
    assert "could not record" not in done.stderr
    lines = _spooled(spool_dir)
    assert [(r["reason"], r["tool_use_id"]) for r in lines] == [("not-a-repo", "ab\ud800")]
    # The store cannot hold a lone surrogate that names no bytes: it shows it escaped.
    (gap,) = cli_json("gaps", "s1")
    assert gap["tool_use_id"] == "ab\\ud800"


def test_a_call_id_with_a_lone_surrogate_still_gets_its_checkpoint(
    repo: Path, spool_dir: Path
) -> None:
    (repo / "a.txt").write_text("a\n")
    done = cli("snapshot-hook", input=_hook_input(str(repo), "ab\ud800", str(repo / "a.txt")))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    (row,) = cli_json("snapshots", "s1")
    assert row["tool_use_id"] == "ab\\ud800"
    assert row["label"] == "Write a.txt"
    assert _spooled(spool_dir) == []
    # The same call reported again is a replay of the same request, not a new row.
    assert cli("snapshot-hook", input=_hook_input(str(repo), "ab\ud800")).returncode == 0
    assert len(cli_json("snapshots", "s1")) == 1


def test_a_cwd_with_a_lone_surrogate_is_bad_input(tmp_path: Path, spool_dir: Path) -> None:
    done = cli("snapshot-hook", input=_hook_input(str(tmp_path) + "/x\ud800", "t1"))
    assert done.returncode == 0 and done.stdout == ""
    assert [r["reason"] for r in _spooled(spool_dir)] == ["bad-hook-input"]


def test_input_nested_too_deeply_is_bad_input(spool_dir: Path) -> None:
    done = cli("snapshot-hook", input=b'{"session_id":"s1","x":' + b"[" * 200_000)
    assert done.returncode == 0 and done.stdout == ""
    assert [r["reason"] for r in _spooled(spool_dir)] == ["bad-hook-input"]
    deep = b'{"session_id":"s1","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert cli("snapshot-hook", input=deep).returncode == 0
    assert [r["reason"] for r in _spooled(spool_dir)] == ["bad-hook-input"] * 2


# -- worktrees at paths that are not UTF-8 --------------------------------------


# A path that is not UTF-8 comes back as the same str from SQLite; PostgreSQL
# keeps it escaped (docs/how-to/runs.md, "Limits"), so the exact round trip is
# SQLite's.
@pytest.mark.sqlite_file
@pytest.mark.parametrize("backend", ["jj", "git"])
def test_a_non_utf8_worktree_is_captured_in_process(
    tmp_path: Path, backend: str, spool_dir: Path
) -> None:
    wt = _odd_repo(tmp_path, backend)
    (wt / ("f" + os.fsdecode(b"\xfa"))).write_text("1\n")
    raw = _hook_input(str(wt), "t1", str(wt / os.fsdecode(b"f\xfa")))
    done = cli("snapshot-hook", input=raw)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    # jj cannot record the file's non-UTF-8 *name*: it is a gap naming it,
    # never a silent omission (tests/durability/capture/test_jj_non_utf8_names.py).
    assert [(g["reason"], g["detail"].split(":")[0]) for g in _spooled(spool_dir)] == (
        [("unreadable-path", "f\\xfa")] if backend == "jj" else [])
    (row,) = cli_json("snapshots", "s1")
    assert row["worktree"] == str(wt)  # the exact bytes, back through JSON
    assert row["label"] == "Write f\udcfa"
    # The CLI takes the path as bytes too, and restores into it.
    (wt / "README.md").write_text("changed\n")
    snap = subprocess.run([durability_exe(), "snapshot", os.fsencode(wt), "--run", "r",
                           "--node", "n"], capture_output=True, timeout=120)
    assert snap.returncode == 0, snap.stderr
    (wt / "README.md").write_text("lost\n")
    restored = cli("restore", "s1", "--node", "session", "--seq", "1")
    assert restored.returncode == 0, restored.stderr
    assert os.fsencode(wt).replace(b"\xff", b"\\xff").replace(b"\xfe", b"\\xfe") in (
        restored.stdout.encode())
    assert (wt / "README.md").read_text() == "hello\n"


# A path that is not UTF-8 comes back as the same str from SQLite; PostgreSQL
# keeps it escaped (docs/how-to/runs.md, "Limits"), so the exact round trip is
# SQLite's.
@pytest.mark.sqlite_file
@pytest.mark.parametrize("backend", ["jj", "git"])
def test_a_non_utf8_worktree_is_captured_by_the_service(
    tmp_path: Path, backend: str, spool_dir: Path,
    service_process: ServiceProcess
) -> None:
    wt = _odd_repo(tmp_path, backend)
    done = cli("snapshot-hook", input=_hook_input(str(wt), "t\ud800", str(wt / "README.md")))
    assert done.returncode == 0 and done.stdout == "", done.stderr
    assert _spooled(spool_dir) == []
    (row,) = cli_json("snapshots", "s1")
    assert row["worktree"] == str(wt)
    assert row["tool_use_id"] == "t\\ud800"


# A path that is not UTF-8 comes back as the same str from SQLite; PostgreSQL
# keeps it escaped (docs/how-to/runs.md, "Limits"), so the exact round trip is
# SQLite's.
@pytest.mark.sqlite_file
def test_a_missing_non_utf8_path_is_one_escaped_line(tmp_path: Path) -> None:
    missing = os.fsencode(tmp_path) + b"/gone\xff"
    done = subprocess.run([durability_exe(), "snapshot", missing, "--run", "r", "--node", "n"],
                          capture_output=True, timeout=120)
    assert done.returncode == 5
    lines = done.stderr.decode("ascii").splitlines()  # escaped: plain ASCII
    assert len(lines) == 1
    assert lines[0].startswith("durability: worktree-missing: ")
    assert "gone\\xff" in lines[0]
    (gap,) = cli_json("gaps", "r")
    assert gap["worktree"] == os.fsdecode(missing)


# -- the layers one by one ------------------------------------------------------


def test_the_store_keeps_non_utf8_paths_exactly(tmp_path: Path) -> None:
    path = os.fsdecode(b"/tmp/a\xff/b\xc3")
    with Store(tmp_path / "s.db") as store:
        key = AttemptKey("r", "n")
        store.record_checkpoint(NewCheckpoint(key=key, commit_id="c1", worktree=path,
                                              source="hook", request_id="q1",
                                              tool_use_id="t\ud800", label="Write " + path))
        (row,) = store.checkpoints("r")
        assert (row.worktree, row.label, row.tool_use_id) == (path, "Write " + path, "t\\ud800")
        assert store.attempts("r")[0].worktree == path
        store.add_gaps([Gap(ts_ms=1, run_id="r", request_id="q2", reason="jj-failed",
                            worktree=path, detail="x\ud800")])
        (gap,) = store.gaps("r")
        assert (gap.worktree, gap.detail) == (path, "x\\ud800")


def test_spool_lines_are_ascii_and_read_back_the_same(spool_dir: Path) -> None:
    path = os.fsdecode(b"/w\xff")
    record = spool.gap_record(run_id="r", request_id="q", reason="jj-failed", worktree=path,
                              tool_use_id="t\ud800", detail="é")
    written = spool.append_gap(spool_dir, record)
    data = written.read_bytes()
    assert data.isascii()
    (back,) = spool.read_spool(written).records
    assert back == record


def test_the_wire_keeps_a_non_utf8_worktree_and_refuses_a_broken_one() -> None:
    path = os.fsdecode(b"/w\xff")
    line = json.dumps({"v": 1, "op": "capture", "request_id": "q", "run_id": "r",
                       "node_id": "n", "worktree": path, "source": "hook",
                       "tool_use_id": "t\ud800", "label": "L\udcfe"}).encode()
    req = protocol.parse_request(line)
    assert isinstance(req, protocol.CaptureReq)
    assert (req.worktree, req.tool_use_id, req.label) == (path, "t\ud800", "L\udcfe")
    with pytest.raises(ProtocolError, match="worktree"):
        protocol.parse_request(line.replace(b"\\udcff", b"\\ud800"))
    too_long = json.dumps({"v": 1, "op": "capture", "request_id": "q", "run_id": "r",
                           "node_id": "n", "worktree": "/", "source": "hook",
                           "label": "\udcff" * 1001}).encode()
    with pytest.raises(ProtocolError, match="label"):
        protocol.parse_request(too_long)


def test_printable_escapes_for_display() -> None:
    assert ids.printable(os.fsdecode(b"/a\xff")) == "/a\\xff"
    assert ids.printable("t\ud800") == "t\\ud800"
    assert ids.printable("plain é") == "plain é"
