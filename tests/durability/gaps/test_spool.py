"""The gap spool (contract 5, docs/DESIGN.md): one private NDJSON file per run, ingested into
the store idempotently, torn lines skipped and counted."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import ingest_spool
from durability.ground.errors import InsecurePath
from durability.ground.ids import safe_filename
from durability.store import Store
from tests.helpers import ServiceProcess, cli, cli_json, hook_payload, start_service, wait_for


@pytest.fixture
def spool_dir() -> Path:
    return Path(os.environ["DURABILITY_SPOOL_DIR"])


@pytest.fixture
def store() -> Iterator[Store]:
    with Store(Settings.from_env().database) as s:
        yield s


def record(run_id: str, request_id: str, reason: str = "jj-failed",
           **fields: Any) -> dict[str, Any]:
    return spool.gap_record(run_id=run_id, request_id=request_id, reason=reason,
                            node_id="n", iteration=0, attempt=1, worktree="/w",
                            source="manual", detail="d", **fields)


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


# -- the files -------------------------------------------------------------------


def test_one_file_per_run_in_a_0700_folder(spool_dir: Path) -> None:
    first = spool.append_gap(spool_dir, record("run-a", "r1"))
    again = spool.append_gap(spool_dir, record("run-a", "r2"))
    other = spool.append_gap(spool_dir, record("run-b", "r3"))
    assert first == again == spool_dir / "run-a.gaps.ndjson"
    assert other == spool_dir / "run-b.gaps.ndjson"
    assert stat.S_IMODE(os.stat(spool_dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(first).st_mode) == 0o600
    assert [json.loads(x)["request_id"] for x in lines(first)] == ["r1", "r2"]


def test_existing_open_folder_is_made_private(spool_dir: Path) -> None:
    spool_dir.mkdir(mode=0o755)
    os.chmod(spool_dir, 0o755)
    spool.append_gap(spool_dir, record("run-a", "r1"))
    assert stat.S_IMODE(os.stat(spool_dir).st_mode) == 0o700


@pytest.mark.parametrize("run_id", ["a:b@c+d=e", "a@b", "../../x", "..", "/etc/passwd",
                                    "x" * 300, "sp ace", "ünïcode", "a\x00b"])
def test_odd_run_ids_stay_inside_the_folder(spool_dir: Path, run_id: str) -> None:
    path = spool.append_gap(spool_dir, record(run_id, "r1"))
    assert path.parent == spool_dir
    assert path.name.endswith(spool.SUFFIX)
    assert "/" not in path.name and not path.name.startswith(".")
    assert len(path.name.encode()) <= 255
    assert json.loads(lines(path)[0])["run_id"] == run_id
    assert sorted(p.name for p in spool_dir.iterdir()) == [path.name]


def test_ids_that_look_alike_get_different_files(spool_dir: Path) -> None:
    names = {spool.append_gap(spool_dir, record(r, "r-" + r)).name
             for r in ("a:b", "a@b", "a+b", "a=b", "a_b")}
    assert len(names) == 5
    assert safe_filename("a_b") == "a_b"


def test_symlinked_folder_is_refused(spool_dir: Path, tmp_path: Path) -> None:
    real = tmp_path / "real-spool"
    real.mkdir(mode=0o700)
    spool_dir.symlink_to(real)
    with pytest.raises(InsecurePath):
        spool.append_gap(spool_dir, record("run-a", "r1"))
    assert list(real.iterdir()) == []


@pytest.fixture
def nobody_owned(spool_dir: Path) -> Iterator[Path]:
    if os.getuid() != 0:
        pytest.fail("this test chowns a folder to `nobody` and must run as root (it does in CI)")
    spool_dir.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody")
    os.chown(spool_dir, nobody.pw_uid, nobody.pw_gid)
    yield spool_dir
    os.chown(spool_dir, 0, 0)


def test_folder_owned_by_another_user_is_refused(nobody_owned: Path) -> None:
    with pytest.raises(InsecurePath, match="owned by uid"):
        spool.append_gap(nobody_owned, record("run-a", "r1"))
    assert list(nobody_owned.iterdir()) == []


def test_hook_with_an_unusable_spool_still_exits_0_quietly(nobody_owned: Path,
                                                          tmp_path: Path) -> None:
    done = cli("snapshot-hook", input=json.dumps(hook_payload(tmp_path / "gone")))
    assert (done.returncode, done.stdout) == (0, "")
    assert "could not record gap" not in done.stderr
    assert "Traceback" not in done.stderr
    assert list(nobody_owned.iterdir()) == []
    # Issue 8 item 7: the gap went to the private fallback in the state folder.
    fallback = Path(os.environ["DURABILITY_HOME"]) / "spool"
    assert [r["reason"] for r in spool.read_spool(next(fallback.iterdir())).records] == [
        "worktree-missing"]


@pytest.mark.parametrize("kind", ["symlink", "nobody"])
def test_gaps_command_refuses_a_foreign_spool(spool_dir: Path, tmp_path: Path,
                                              kind: str) -> None:
    # Someone else's spool could plant gaps in our record: reading it is
    # refused as writing to it is, and said on one line; the listing still
    # works from the other folders and the store (issue 8 item 7).
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o700)
    spool.append_gap(planted, record("run-p", "r1"))
    if kind == "symlink":
        spool_dir.symlink_to(planted)
    else:
        planted.rename(spool_dir)
        nobody = pwd.getpwnam("nobody")
        os.chown(spool_dir, nobody.pw_uid, nobody.pw_gid)
    done = cli("gaps", "run-p", "--json")
    # The planted gap was not taken in, so the run has no record at all:
    # not-found (exit 3), after the one line that says which folder was skipped.
    assert done.returncode == 3
    skipped, not_found = done.stderr.strip().splitlines()
    assert skipped.startswith(f"durability: spool folder skipped: {spool_dir}: ")
    assert not_found.startswith("durability: not-found: no run or session 'run-p'")
    with Store(Settings.from_env().database) as s:
        assert s.gaps("run-p") == []


def test_service_with_an_unusable_spool_still_answers_and_records(
    spool_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "real-spool"
    real.mkdir(mode=0o700)
    spool_dir.symlink_to(real)
    monkeypatch.setenv("DURABILITY_BACKEND", "jj")
    plain = tmp_path / "plain"
    plain.mkdir()
    svc = start_service(tmp_path)
    try:
        from durability.ground import client

        answer = client.call(svc.socket_path, {
            "v": 1, "op": "capture", "request_id": "r-unspooled", "run_id": "run-u",
            "node_id": "n", "worktree": str(plain), "source": "manual"}, timeout_s=60)
    finally:
        assert svc.stop() == 0
    assert answer["ok"] is False and answer["error"]["code"] == "not-a-jj-repo"
    # The spool could not take it; the store did.
    assert answer["gap_recorded"] is True
    with Store(Settings.from_env().database) as s:
        assert [g.request_id for g in s.gaps("run-u")] == ["r-unspooled"]
    assert list(real.iterdir()) == []
    assert "Traceback" not in svc.log()


# -- torn lines and ingestion ---------------------------------------------------------


def test_torn_lines_are_skipped_counted_and_later_lines_ingested(spool_dir: Path,
                                                                 store: Store) -> None:
    path = spool.append_gap(spool_dir, record("run-t", "r1"))
    with open(path, "ab") as f:
        f.write(b'{"ts_ms": 1, "run_id": "run-t", "requ\n')  # a garbage line
        f.write(b"\x00\xff not json\n")
        f.write(b'["a list"]\n')
        f.write(b'{"ts_ms": 1, "run_id": "run-t", "request_id": "no-reason"}\n')
    spool.append_gap(spool_dir, record("run-t", "r2"))
    with open(path, "ab") as f:
        f.write(b'{"ts_ms": 1, "run_id": "run-t", "request_id": "torn-tail", "rea')
    read = spool.read_spool(path)
    assert [r["request_id"] for r in read.records] == ["r1", "r2"]
    assert read.torn == 5

    done = cli("gaps", "run-t", "--json")
    assert done.returncode == 0, done.stderr
    assert [g["request_id"] for g in json.loads(done.stdout)] == ["r1", "r2"]
    assert "skipped 5 torn spool line(s)" in done.stderr

    # A writer after the crash starts on a fresh line and is ingested.
    spool.append_gap(spool_dir, record("run-t", "r3"))
    assert lines(path)[-1].startswith(b'{"ts_ms"')
    assert [g["request_id"] for g in cli_json("gaps", "run-t")] == ["r1", "r2", "r3"]
    assert [g.request_id for g in store.gaps("run-t")] == ["r1", "r2", "r3"]


def test_ingesting_twice_adds_nothing(spool_dir: Path, store: Store) -> None:
    for i in range(3):
        spool.append_gap(spool_dir, record("run-i", f"r{i}"))
    spool.append_gap(spool_dir, record("run-j", "j0"))
    first = ingest_spool(store, spool_dir)
    assert (first.added, first.torn, first.files) == (4, 0, 2)
    second = ingest_spool(store, spool_dir)
    assert (second.added, second.files) == (0, 2)
    # The same request spooled twice (two writers saw it) is one row.
    spool.append_gap(spool_dir, record("run-i", "r0", reason="timeout"))
    assert ingest_spool(store, spool_dir).added == 0
    assert [g.request_id for g in store.gaps("run-i")] == ["r0", "r1", "r2"]
    assert len(cli_json("gaps", "run-i")) == 3


def test_service_ingests_the_spool_at_start(spool_dir: Path, tmp_path: Path) -> None:
    spool.append_gap(spool_dir, record("run-svc", "early"))
    svc: ServiceProcess = start_service(tmp_path)
    try:
        with Store(Settings.from_env().database) as s:
            wait_for(lambda: s.gaps("run-svc"), timeout=30)
            assert [g.request_id for g in s.gaps("run-svc")] == ["early"]
    finally:
        assert svc.stop() == 0


def test_hook_gap_has_every_spool_field(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    payload = hook_payload(plain, session_id="ignored", tool_use_id="toolu_42",
                           file_path=str(plain / "f.txt"))
    env = {**os.environ, "DURABILITY_BACKEND": "jj", "DURABILITY_RUN_ID": "run-h",
           "DURABILITY_NODE_ID": "node-h", "DURABILITY_ITERATION": "4",
           "DURABILITY_ATTEMPT": "2"}
    done = cli("snapshot-hook", input=json.dumps(payload), env=env)
    assert (done.returncode, done.stdout) == (0, "")
    [gap] = cli_json("gaps", "run-h")
    assert set(gap) == set(spool.FIELDS)
    assert isinstance(gap["ts_ms"], int) and gap["ts_ms"] > 1_600_000_000_000
    assert gap["request_id"].startswith("hook-")
    assert {k: gap[k] for k in spool.FIELDS if k not in ("ts_ms", "request_id", "detail")} == {
        "run_id": "run-h", "node_id": "node-h", "iteration": 4, "attempt": 2,
        "worktree": str(plain), "source": "hook", "tool_use_id": "toolu_42",
        "reason": "not-a-jj-repo",
    }
    assert str(plain) in gap["detail"]
    [line] = lines(spool_dir_for("run-h"))
    assert json.loads(line) == gap


def spool_dir_for(run_id: str) -> Path:
    return Path(os.environ["DURABILITY_SPOOL_DIR"]) / (safe_filename(run_id) + spool.SUFFIX)


# -- writers ---------------------------------------------------------------------------

_WRITER = r"""
import sys
from pathlib import Path
from durability.gaps import spool
for i in range(int(sys.argv[3])):
    spool.append_gap(Path(sys.argv[1]), spool.gap_record(
        run_id="run-c", request_id=f"{sys.argv[2]}-{i}", reason="jj-failed",
        detail="x" * 1500))
"""


def test_concurrent_writers_never_interleave(spool_dir: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(spool_dir), f"w{n}", "40"])
             for n in range(4)]
    assert [p.wait(120) for p in procs] == [0] * 4
    read = spool.read_spool(spool_dir / "run-c.gaps.ndjson")
    assert read.torn == 0
    assert len({r["request_id"] for r in read.records}) == 160


_LAST = r"""
import os, sys, threading
from pathlib import Path
from durability.gaps import spool
d = Path(sys.argv[1])
rec = spool.gap_record(run_id="run-l", request_id="req", reason="timeout")
assert spool.append_last_gap(d, rec) is not None
late = threading.Thread(target=spool.append_gap, daemon=True,
                        args=(d, spool.gap_record(run_id="run-l", request_id="req",
                                                  reason="jj-missing")))
late.start()
late.join(1.0)
sys.stdout.write("blocked" if late.is_alive() else "wrote")
sys.stdout.flush()
os._exit(0)
"""


def test_last_gap_holds_the_spool_until_exit(spool_dir: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _LAST, str(spool_dir)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "blocked"
    assert [json.loads(x)["reason"] for x in lines(spool_dir / "run-l.gaps.ndjson")] == [
        "timeout"]


def test_last_gap_skips_a_request_already_on_file(spool_dir: Path) -> None:
    spool.append_gap(spool_dir, record("run-k", "req", reason="jj-missing"))
    script = ("import sys; from pathlib import Path; from durability.gaps import spool; "
              "r = spool.gap_record(run_id='run-k', request_id='req', reason='timeout'); "
              "print(spool.append_last_gap(Path(sys.argv[1]), r))")
    done = subprocess.run([sys.executable, "-c", script, str(spool_dir)], capture_output=True,
                          text=True, timeout=60)
    assert done.stdout.strip() == "None", done.stderr
    assert [json.loads(x)["reason"] for x in lines(spool_dir / "run-k.gaps.ndjson")] == [
        "jj-missing"]
