"""Contract 8 (docs/DESIGN.md), security: only the owner reaches the service, private folders
stay private, and paths and ids from outside never reach a shell or leave
the folder they are joined to."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.gaps import spool
from durability.ground import ids, paths
from durability.ground.errors import InsecurePath
from durability.store import Store
from tests.helpers import (
    ServiceProcess,
    cli,
    cli_json,
    hook_payload,
    make_jj_repo,
    ping,
    start_service,
)

NOBODY = pwd.getpwnam("nobody")


@pytest.fixture(autouse=True)
def root_only() -> None:
    if os.getuid() != 0:
        pytest.fail("these tests use another uid (`nobody`) and must run as root (they do in CI)")


def capture_req(worktree: str, **fields: Any) -> dict[str, Any]:
    req = {"v": 1, "op": "capture", "request_id": "req-1", "run_id": "run-s",
           "node_id": "n", "iteration": 0, "attempt": 1, "worktree": worktree,
           "source": "manual"}
    req.update(fields)
    return req


def store() -> Store:
    return Store(Settings.from_env().database)


def store_checkpoints(run_id: str) -> list[Any]:
    with store() as s:
        return s.checkpoints(run_id)


def store_gaps(run_id: str) -> list[Any]:
    with store() as s:
        return s.gaps(run_id)


# -- another user ----------------------------------------------------------------

_AS_NOBODY = r"""
import json, os, socket, sys
os.setgroups([])
os.setgid(int(sys.argv[2]))
os.setuid(int(sys.argv[3]))
out = {"uid": os.getuid()}
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
conn.settimeout(30)
try:
    conn.connect(sys.argv[1])
except OSError as exc:
    out["connect_error"] = exc.errno
else:
    try:
        conn.sendall(sys.argv[4].encode() + b"\n")
    except OSError as exc:  # refused before it read anything: the answer may be queued
        out["send_error"] = exc.errno
    try:
        buf = b""
        while b"\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                break
            buf += chunk
        out["answer"] = buf.decode()
    except OSError as exc:
        out["io_error"] = exc.errno
print(json.dumps(out))
"""


def _as_nobody(sock: Path, request: dict[str, Any]) -> dict[str, Any]:
    """Connect as ``nobody`` (the child drops root before it touches the socket)."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", _AS_NOBODY, str(sock), str(NOBODY.pw_gid),
         str(NOBODY.pw_uid), json.dumps(request)],
        capture_output=True, text=True, timeout=60, cwd="/",
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    assert out["uid"] == NOBODY.pw_uid
    return out


def test_other_uid_cannot_even_reach_the_socket(service_process: ServiceProcess,
                                                tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo")
    out = _as_nobody(service_process.socket_path, capture_req(str(repo)))
    assert out.get("connect_error") is not None, out  # 0700 folder, 0600 socket
    assert store_checkpoints("run-s") == []


@pytest.mark.parametrize("op", ["capture", "ping"])
def test_other_uid_is_refused_by_peer_credentials(service_process: ServiceProcess, tmp_path: Path,
                                                  op: str) -> None:
    repo = make_jj_repo(tmp_path / "repo")
    (repo / "secret.txt").write_text("s\n")
    folder, path = service_process.socket_path.parent, service_process.socket_path
    request = (capture_req(str(repo), request_id="from-nobody") if op == "capture"
               else {"v": 1, "op": "ping"})
    # For this test only, open the file-system guard so that only the peer
    # credential check stands between another user and the service.
    os.chmod(folder, 0o711)
    os.chmod(path, 0o666)
    try:
        out = _as_nobody(path, request)
    finally:
        os.chmod(path, 0o600)
        os.chmod(folder, 0o700)
    assert "connect_error" not in out, out
    answer = json.loads(out["answer"])
    assert answer["ok"] is False
    assert answer["error"]["code"] == "peer-refused"
    assert store_checkpoints("run-s") == []
    assert store_gaps("run-s") == []
    assert "pid" not in answer  # nothing about the service leaks either
    assert ping(path) is not None


_FAKE_SERVICE_AS_NOBODY = r"""
import json, os, socket, sys
os.setgroups([])
os.setgid(int(sys.argv[2]))
os.setuid(int(sys.argv[3]))
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
listener.listen(8)
print("ready", flush=True)
while True:
    conn, _ = listener.accept()
    conn.recv(65536)
    conn.sendall(json.dumps({"ok": True, "pid": 1, "seq": 1, "commit_id": "0" * 40,
                             "deduped": False, "gap_recorded": True}).encode() + b"\n")
    conn.close()
"""


def test_a_service_run_by_another_uid_is_never_believed(tmp_path: Path) -> None:
    # Another user who gets to the default socket folder first (/tmp/durability-UID
    # when there is no runtime folder) must not be able to answer "captured"
    # for our tool calls: nothing would be captured and no gap filed.
    repo = make_jj_repo(tmp_path / "repo")
    (repo / "work.txt").write_text("w\n")
    base = Path(tempfile.mkdtemp(prefix="dur-evil-"))
    os.chmod(base, 0o755)
    theirs = base / "durability-0"
    theirs.mkdir()
    os.chown(theirs, NOBODY.pw_uid, NOBODY.pw_gid)
    sock = theirs / "service.sock"
    fake = subprocess.Popen(
        [sys.executable, "-I", "-c", _FAKE_SERVICE_AS_NOBODY, str(sock), str(NOBODY.pw_gid),
         str(NOBODY.pw_uid)], stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert fake.stdout is not None and fake.stdout.readline().strip() == "ready"
        env = {**os.environ, "DURABILITY_SOCKET": str(sock)}
        payload = hook_payload(repo, session_id="sess-spoof", tool_use_id="toolu_s")
        done = cli("snapshot-hook", input=json.dumps(payload), env=env)
        assert done.returncode == 0 and done.stdout == "", done.stderr
        assert done.stderr == ""
        manual = cli("snapshot", str(repo), "--run", "run-spoof", "--node", "n", "--json",
                     env=env)
    finally:
        fake.kill()
        fake.wait(30)
        if fake.stdout is not None:
            fake.stdout.close()
        shutil.rmtree(base, ignore_errors=True)
    [row] = store_checkpoints("sess-spoof")  # captured here, not "answered" there
    assert row.commit_id != "0" * 40
    assert manual.returncode == 0, manual.stderr
    assert json.loads(manual.stdout)["commit_id"] != "0" * 40


# -- private folders ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["symlink", "nobody"])
def test_serve_refuses_a_socket_folder_it_does_not_own(tmp_path: Path, kind: str) -> None:
    base = Path(os.environ["DURABILITY_SOCKET"]).parent
    folder = base / "sockets"
    if kind == "symlink":
        real = base / "real"
        real.mkdir(mode=0o700)
        folder.symlink_to(real)
    else:
        folder.mkdir(mode=0o700)
        os.chown(folder, NOBODY.pw_uid, NOBODY.pw_gid)
    done = cli("serve", "--socket", str(folder / "s.sock"), timeout=60)
    assert done.returncode == 4, done.stderr
    assert done.stderr.startswith("durability: insecure-path: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert list(folder.iterdir()) == []
    if kind == "nobody":
        os.chown(folder, 0, 0)


def test_serve_tightens_an_open_socket_folder_of_its_own(tmp_path: Path) -> None:
    folder = Path(os.environ["DURABILITY_SOCKET"]).parent / "open"
    folder.mkdir()
    os.chmod(folder, 0o777)
    svc = start_service(tmp_path, socket_path=folder / "s.sock")
    try:
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    finally:
        assert svc.stop() == 0


@pytest.mark.parametrize("use", ["socket", "spool"])
def test_a_shared_sticky_folder_is_refused_never_tightened(tmp_path: Path, use: str) -> None:
    # `DURABILITY_SOCKET=/tmp/d.sock` run as root (containers): tightening
    # its folder would chmod /tmp to 0700 and lock every other user out.
    shared = Path(os.environ["DURABILITY_SOCKET"]).parent / "shared-tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    if use == "socket":
        done = cli("serve", "--socket", str(shared / "s.sock"), timeout=60)
        assert done.returncode == 4, done.stderr
        assert done.stderr.startswith("durability: insecure-path: ")
        assert len(done.stderr.strip().splitlines()) == 1
    else:
        with pytest.raises(InsecurePath, match="sticky"):
            spool.append_gap(shared, spool.gap_record(run_id="r", request_id="q",
                                                      reason="timeout"))
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    assert list(shared.iterdir()) == []


def test_default_socket_skips_a_runtime_folder_that_is_not_private(tmp_path: Path) -> None:
    ours = tmp_path / "run-ours"
    ours.mkdir(mode=0o700)
    assert paths.socket_path({"XDG_RUNTIME_DIR": str(ours)}) == ours / "durability" / "service.sock"
    foreign = tmp_path / "run-foreign"
    foreign.mkdir(mode=0o700)
    os.chown(foreign, NOBODY.pw_uid, NOBODY.pw_gid)
    shared = tmp_path / "run-shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    for bad in (foreign, shared):
        chosen = paths.socket_path({"XDG_RUNTIME_DIR": str(bad)})
        assert bad not in chosen.parents, chosen
        assert chosen.name == "service.sock"


@pytest.mark.sqlite_file
def test_state_files_are_private(repo: Path) -> None:
    state = Path(os.environ["DURABILITY_HOME"])
    assert not state.exists()
    cli_json("snapshot", str(repo), "--run", "run-p", "--node", "n")
    cli("snapshot", str(repo.parent / "missing"), "--run", "run-p", "--node", "n")
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        if (state / name).exists():
            assert stat.S_IMODE(os.stat(state / name).st_mode) & 0o077 == 0, name
    assert (state / "state.db").exists()
    assert stat.S_IMODE(os.stat(state / "locks").st_mode) == 0o700
    spool_dir = Path(os.environ["DURABILITY_SPOOL_DIR"])
    assert stat.S_IMODE(os.stat(spool_dir).st_mode) == 0o700
    [gap_file] = spool_dir.iterdir()
    assert stat.S_IMODE(os.stat(gap_file).st_mode) == 0o600


def test_the_replication_lock_is_private_too(tmp_path: Path) -> None:
    """Every file the toolkit makes in the state folder is 0600, the
    replicator's lock as well (it was left to the umask: 0644)."""
    from durability.remote.replicator import Replicator

    old = os.umask(0o022)
    try:
        settings = Settings.from_env()
        with Store(settings.database) as store:
            assert Replicator(settings, lambda: store, os.environ).run_once() == 0
    finally:
        os.umask(old)
    made = settings.state_dir / "replicate.lock"
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o600


def test_spool_file_planted_as_a_symlink_is_not_followed(tmp_path: Path) -> None:
    spool_dir = Path(os.environ["DURABILITY_SPOOL_DIR"])
    spool_dir.mkdir(mode=0o700)
    target = tmp_path / "victim.txt"
    target.write_text("untouched\n")
    (spool_dir / ("sess-sym" + spool.SUFFIX)).symlink_to(target)
    with pytest.raises(OSError):
        spool.append_gap(spool_dir, spool.gap_record(run_id="sess-sym", request_id="r",
                                                     reason="jj-failed"))
    done = cli("snapshot-hook", input=json.dumps(hook_payload(tmp_path / "gone",
                                                              session_id="sess-sym")))
    assert (done.returncode, done.stdout) == (0, "")
    assert target.read_text() == "untouched\n"


# -- what comes from outside ---------------------------------------------------------------


def test_shell_metacharacters_in_paths_are_just_names(tmp_path: Path) -> None:
    weird = tmp_path / "it's $(touch PWNED1); `touch PWNED2` | x & y\\z \"q\" ü"
    repo = make_jj_repo(weird)
    (repo / "$(touch PWNED3).txt").write_text("one\n")
    first = cli_json("snapshot", str(repo), "--run", "run-w", "--node", "n",
                     "--label", "$(touch PWNED4)")
    (repo / "$(touch PWNED3).txt").write_text("two\n")
    done = cli("snapshot-hook", input=json.dumps(hook_payload(
        repo, session_id="run-w", file_path=str(repo / "; touch PWNED5"))), cwd=repo)
    assert (done.returncode, done.stdout) == (0, "")
    restored = cli_json("restore", "run-w", "--node", "n", "--seq", "1")
    assert restored["restored"]["commit_id"] == first["commit_id"]
    assert (repo / "$(touch PWNED3).txt").read_text() == "one\n"
    labels = {(r["node_id"], r["seq"]): r["label"] for r in cli_json("snapshots", "run-w")}
    assert labels[("n", 1)] == "$(touch PWNED4)"
    assert labels[("session", 1)] == "Write ; touch PWNED5"
    leaked = [hit for where in (tmp_path, repo, Path.cwd(), Path("/"))
              for hit in where.glob("PWNED*")]
    assert leaked == []


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "a\\b", "/abs", "a\nb", "a b",
                                 "a\x00b", "-rf", ".hidden", "x" * 201, "ü", "a;b", "$(id)"])
def test_ids_that_could_name_a_path_or_an_option_are_refused(bad: str) -> None:
    assert not ids.is_valid_id(bad)
    with pytest.raises(ValueError):
        ids.validate_id(bad, "run id")


@pytest.mark.parametrize("good", ["0b6f8a52-3c3e-4b0e-9f1a-2d1b7c4e5f60", "run_1",
                                  "a.b:c@d+e=f-g", "x" * 200])
def test_ordinary_ids_are_accepted(good: str) -> None:
    assert ids.validate_id(good, "run id") == good


def test_nul_in_a_worktree_is_a_bad_request(service_process: ServiceProcess) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(30)
        conn.connect(str(service_process.socket_path))
        conn.sendall(json.dumps(capture_req("/tmp/a\x00b")).encode() + b"\n")
        answer = json.loads(conn.makefile("rb").readline())
    assert answer["error"]["code"] == "bad-request"


def test_a_silent_client_does_not_block_others(service_process: ServiceProcess) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        idle.connect(str(service_process.socket_path))
        idle.sendall(b'{"v": 1, "op": "pi')  # and then nothing
        for _ in range(3):
            assert ping(service_process.socket_path) is not None


def test_insecure_path_error_is_raised_for_a_symlinked_private_dir(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(InsecurePath, match="symlink"):
        paths.ensure_private_dir(tmp_path / "link")
