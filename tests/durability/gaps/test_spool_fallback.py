"""Issue 8 item 7: a gap is written whole or not at all, and lands somewhere
durable when the spool folder is full, squatted by another uid or a symlink:
the spool folder, then ``spool`` in the state folder, then the store itself.
Listing and ingest read every location and never fail for one unusable one.

The full filesystem is real: a 64 KiB tmpfs, filled up, on which the kernel
really returns a short count from write(2) (see ``test_the_tmpfs_really_writes_short``).
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import write_gap
from durability.store import Store
from tests import pg
from tests.helpers import cli, cli_json, durability_exe

PAGE = 4096


def _record(request_id: str, detail: str = "d", run_id: str = "run-f") -> dict[str, Any]:
    return spool.gap_record(run_id=run_id, request_id=request_id, reason="jj-failed",
                            node_id="n", iteration=0, attempt=1, worktree="/w",
                            source="manual", detail=detail)


def _lines(folder: Path) -> list[dict[str, Any]]:
    if not folder.is_dir():
        return []
    out = []
    for f in sorted(folder.iterdir()):
        read = spool.read_spool(f)
        assert read.torn == 0, f"torn line in {f}"
        out += read.records
    return out


def _store_gaps(run_id: str) -> list[str]:
    store = pg.existing_store()
    if store is None:
        return []
    with store as s:
        return [g.reason for g in s.gaps(run_id)]


def _bad_hook(run_id: str = "sess-f") -> bytes:
    # Valid JSON with a usable session and a cwd that does not exist: one gap.
    return json.dumps({"session_id": run_id, "tool_use_id": "t1",
                       "cwd": "/nonexistent-durability-test"}).encode()


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs.  Fails (never skips) when it cannot be mounted: the
    short-write path is only exercised for real on a full filesystem."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs",
                           str(mount_point)], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs (run as root): {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


def _fill(folder: Path) -> None:
    """Take every free block of the filesystem holding ``folder``."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for chunk in (PAGE, 1):
            while True:
                try:
                    if os.write(fd, b"f" * chunk) < chunk:
                        break
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    assert os.statvfs(folder).f_bavail == 0


@pytest.fixture
def full_spool(tiny_fs: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The spool folder on a full filesystem, holding one run file whose last
    page has room for some bytes but not for a long line."""
    folder = tiny_fs / "spool"
    spool.append_gap(folder, _record("before"))
    _fill(tiny_fs)
    monkeypatch.setenv("DURABILITY_SPOOL_DIR", str(folder))
    return folder


@pytest.fixture
def fallback() -> Path:
    return Path(os.environ["DURABILITY_HOME"]) / "spool"


# A detail of 1000 'é' is 6000 bytes of ASCII JSON: longer than a page.
LONG = "é" * 1000


def test_the_tmpfs_really_writes_short(full_spool: Path) -> None:
    # The premise of the next test, checked on a copy: write(2) returns less
    # than asked, then ENOSPC.
    path = full_spool / "run-f.gaps.ndjson"
    size = path.stat().st_size
    assert size % PAGE > 0 and len(json.dumps(_record("x", LONG))) > PAGE - size % PAGE
    probe = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        assert 0 < os.write(probe, b"p" * 6000) < 6000
        with pytest.raises(OSError) as caught:
            os.write(probe, b"p")
        assert caught.value.errno == errno.ENOSPC
    finally:
        os.ftruncate(probe, size)
        os.close(probe)


def test_a_short_write_leaves_no_torn_line(full_spool: Path) -> None:
    path = full_spool / "run-f.gaps.ndjson"
    before = path.read_bytes()
    with pytest.raises(OSError) as caught:
        spool.append_gap(full_spool, _record("long", LONG))
    assert caught.value.errno == errno.ENOSPC
    assert path.read_bytes() == before  # cut back to where it was
    read = spool.read_spool(path)
    assert (read.torn, [r["request_id"] for r in read.records]) == (0, ["before"])


def test_a_short_write_moves_the_gap_to_the_fallback(
    full_spool: Path, fallback: Path, settings: Settings
) -> None:
    settings = Settings.from_env()
    assert write_gap(settings, _record("long", LONG)) is True
    assert [r["request_id"] for r in _lines(full_spool)] == ["before"]
    assert [r["request_id"] for r in _lines(fallback)] == ["long"]
    # Listing reads both folders.
    assert [g["request_id"] for g in cli_json("gaps", "run-f")] == ["before", "long"]


def test_hook_on_a_full_spool_files_its_gap_in_the_fallback(
    full_spool: Path, fallback: Path
) -> None:
    done = cli("snapshot-hook", input=_bad_hook())
    assert (done.returncode, done.stdout) == (0, "")
    assert "could not record" not in done.stderr
    assert [r["reason"] for r in _lines(fallback)] == ["worktree-missing"]
    assert [r["run_id"] for r in _lines(full_spool)] == ["run-f"]  # only the old line
    assert [g["reason"] for g in cli_json("gaps", "sess-f")] == ["worktree-missing"]


def test_hook_under_a_file_size_limit_writes_whole_lines_only(
    spool_dir_env: Path, fallback: Path
) -> None:
    # RLIMIT_FSIZE: the kernel writes up to the limit (a short count), then
    # EFBIG; the hook ignores SIGXFSZ rather than dying mid-gap.
    # A long first line, so the limit leaves room for a fresh fallback file.
    spool.append_gap(spool_dir_env, _record("before", "x" * 2000, run_id="sess-f"))
    path = spool_dir_env / "sess-f.gaps.ndjson"
    before = path.read_bytes()
    limit = len(before) + 40

    def limit_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = subprocess.run([durability_exe(), "snapshot-hook"], input=_bad_hook(),
                          capture_output=True, timeout=60, preexec_fn=limit_size,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    assert path.read_bytes() == before
    assert [r["reason"] for r in _lines(fallback)] == ["worktree-missing"]


def test_a_size_limit_cuts_a_line_back_in_process(spool_dir_env: Path) -> None:
    spool.append_gap(spool_dir_env, _record("before"))
    path = spool_dir_env / "run-f.gaps.ndjson"
    code = (
        "import resource, signal, sys\n"
        "from durability.gaps import spool\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({path.stat().st_size + 40},) * 2)\n"
        "rec = spool.gap_record(run_id='run-f', request_id='x', reason='r', detail='y' * 500)\n"
        "try:\n"
        f"    spool.append_gap(__import__('pathlib').Path({str(spool_dir_env)!r}), rec)\n"
        "except OSError as exc:\n"
        "    print(exc.errno)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == str(errno.EFBIG), done.stderr
    assert [r["request_id"] for r in spool.read_spool(path).records] == ["before"]
    assert spool.read_spool(path).torn == 0


@pytest.fixture
def spool_dir_env() -> Path:
    return Path(os.environ["DURABILITY_SPOOL_DIR"])


# -- hostile folders ------------------------------------------------------------


def _squat(folder: Path) -> None:
    if os.getuid() != 0:
        pytest.fail("this test chowns a folder to `nobody` and must run as root")
    folder.mkdir(mode=0o700, parents=True)
    nobody = pwd.getpwnam("nobody")
    os.chown(folder, nobody.pw_uid, nobody.pw_gid)


@pytest.fixture
def squatted_default(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The default spool folder (``spool`` in the state folder) taken by
    another user first."""
    monkeypatch.delenv("DURABILITY_SPOOL_DIR")
    folder = Path(os.environ["DURABILITY_HOME"]) / "spool"
    _squat(folder)
    yield folder
    os.chown(folder, 0, 0)


def test_the_default_spool_is_in_the_state_folder_whatever_tmpdir_says(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A harness and a shell with different TMPDIRs must spool to one place.
    monkeypatch.delenv("DURABILITY_SPOOL_DIR")
    for tmpdir in ("/tmp", str(tmp_path)):
        monkeypatch.setenv("TMPDIR", tmpdir)
        done = cli("snapshot-hook", input=_bad_hook())
        assert (done.returncode, done.stdout) == (0, "")
    home = Path(os.environ["DURABILITY_HOME"])
    assert [r["reason"] for r in _lines(home / "spool")] == ["worktree-missing"] * 2


def test_squatted_default_spool_hook_gap_goes_to_the_store_and_is_listed(
    squatted_default: Path,
) -> None:
    done = cli("snapshot-hook", input=_bad_hook())
    assert (done.returncode, done.stdout) == (0, "")
    assert "could not record" not in done.stderr
    assert list(squatted_default.iterdir()) == []
    listed = cli("gaps", "sess-f", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [g["reason"] for g in json.loads(listed.stdout)] == ["worktree-missing"]
    assert listed.stderr.startswith(f"durability: spool folder skipped: {squatted_default}: ")
    assert "owned by uid" in listed.stderr


def test_symlinked_spool_hook_gap_is_kept(
    spool_dir_env: Path, tmp_path: Path, fallback: Path
) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    spool_dir_env.symlink_to(target)
    done = cli("snapshot-hook", input=_bad_hook())
    assert (done.returncode, done.stdout) == (0, "")
    assert list(target.iterdir()) == []
    assert [r["reason"] for r in _lines(fallback)] == ["worktree-missing"]
    assert [g["reason"] for g in cli_json("gaps", "sess-f")] == ["worktree-missing"]


def test_no_usable_spool_folder_records_straight_into_the_store(
    spool_dir_env: Path, fallback: Path
) -> None:
    _squat(spool_dir_env)
    _squat(fallback)
    try:
        done = cli("snapshot-hook", input=_bad_hook())
        assert (done.returncode, done.stdout) == (0, "")
        assert "could not record" not in done.stderr
        assert _store_gaps("sess-f") == ["worktree-missing"]
        listed = cli("gaps", "sess-f", "--json")
        assert listed.returncode == 0
        assert [g["reason"] for g in json.loads(listed.stdout)] == ["worktree-missing"]
        assert len(listed.stderr.splitlines()) == 2  # one line per skipped folder
    finally:
        os.chown(spool_dir_env, 0, 0)
        os.chown(fallback, 0, 0)


def test_the_last_gap_of_a_timed_out_hook_also_falls_back(
    spool_dir_env: Path, fallback: Path, tmp_path: Path
) -> None:
    # The watchdog's gap (append_last_gap) takes the same route: a stalled
    # stdin past a 300 ms budget, with the spool folder a symlink.
    spool_dir_env.symlink_to(tmp_path)
    proc = subprocess.Popen([durability_exe(), "snapshot-hook"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "DURABILITY_HOOK_TIMEOUT_MS": "400",
                                 "DURABILITY_RUN_ID": "sess-f"})
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.wait(timeout=30)  # stdin stays open: the hook waits on it until its budget
    finally:
        proc.stdin.close()
    assert (proc.returncode, proc.stdout.read()) == (0, b"")
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()
    assert [r["reason"] for r in _lines(fallback)] == ["timeout"]


def test_ingest_skips_an_unusable_folder_and_reads_the_rest(
    spool_dir_env: Path, fallback: Path, tmp_path: Path
) -> None:
    spool.append_gap(fallback, _record("kept"))
    spool_dir_env.symlink_to(tmp_path)
    from durability.gaps.ingest import ingest_spool

    with Store(Settings.from_env().database) as store:
        result = ingest_spool(store, Settings.from_env().spool_dirs)
        assert (result.added, len(result.skipped)) == (1, 1)
        assert "symlink" in result.skipped[0]
        assert [g.request_id for g in store.gaps("run-f")] == ["kept"]
