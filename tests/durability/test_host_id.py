"""This machine's id in worktree keys and run ownership (``durability.store.host``):
``DURABILITY_HOST_ID``, else a random id made once and kept in the state
folder, so a changed host name changes nothing and each state folder (each
container of a fleet) is a machine of its own."""

from __future__ import annotations

import os
import re
import socket
import stat
import subprocess
import sys
import threading
from contextlib import ExitStack
from pathlib import Path

import pytest

from durability.ground import paths
from durability.store import host
from durability.store.host import HOST_ID_FILE, host_id, machine


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    host._cache.clear()


def _renamed(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """This process's host name is ``name`` from now on, as after a rename
    (a new process: nothing remembered)."""
    monkeypatch.setattr(socket, "gethostname", lambda: name)
    host._cache.clear()


@pytest.mark.parametrize("where", ["home", "xdg", "default"])
def test_engine_finds_the_state_folder_durability_does(
        where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if where != "home":
        monkeypatch.delenv("DURABILITY_HOME")
    if where == "default":
        monkeypatch.delenv("XDG_STATE_HOME")
    if where == "home":
        monkeypatch.setenv("DURABILITY_HOME", "~/odd/../state-here")
    assert host.state_dir() == str(paths.state_dir())
    assert host.state_dir().startswith(os.environ["HOME"])


def test_the_id_is_made_once_kept_private_and_survives_a_host_name_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = Path(os.environ["DURABILITY_HOME"])
    assert not state.exists()
    _renamed(monkeypatch, "laptop.local")
    first = machine()
    assert first.source == "kept" and first.path == str(state / HOST_ID_FILE)
    assert re.fullmatch(r"laptop\.local-[0-9a-f]{12}", first.id)
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    kept = state / HOST_ID_FILE
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert kept.read_text() == f"{first.id}\n"
    assert sorted(p.name for p in state.iterdir()) == [HOST_ID_FILE]  # no draft left
    _renamed(monkeypatch, "laptop-at-the-cafe")
    assert host_id() == first.id


def test_each_state_folder_is_a_machine_and_the_variable_overrides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = host_id()
    monkeypatch.setenv("DURABILITY_HOME", str(tmp_path / "container-2"))
    two = host_id()
    assert one != two
    monkeypatch.setenv("DURABILITY_HOME", str(tmp_path / "state"))
    assert host_id() == one  # per state folder, in one process too
    monkeypatch.setenv("DURABILITY_HOST_ID", " build-7 ")
    assert machine() == host.Machine("build-7", "env")


def test_an_unwritable_state_folder_falls_back_to_the_host_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("DURABILITY_HOME", str(blocker / "state"))
    found = machine()
    assert (found.id, found.source) == (socket.gethostname(), "host-name")
    assert "cannot keep an id in" in found.reason and str(blocker) in found.reason


def test_an_unusable_kept_file_is_left_alone_and_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = Path(os.environ["DURABILITY_HOME"])
    state.mkdir()
    (state / HOST_ID_FILE).write_text("")
    found = machine()
    assert (found.id, found.source) == (socket.gethostname(), "host-name")
    assert "holds no usable id" in found.reason
    assert (state / HOST_ID_FILE).read_text() == ""  # never overwritten: it was someone's


def test_threads_at_once_get_one_id() -> None:
    barrier = threading.Barrier(8)
    got: list[str] = []

    def one() -> None:
        barrier.wait()
        got.append(host_id())

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len(set(got)) == 1


_RACER = """
import sys
from durability.store.host import host_id
print("ready", flush=True)
sys.stdin.read(1)  # all released at once
print(host_id(), flush=True)
"""


def test_processes_at_once_get_one_id_read_whole(tmp_path: Path) -> None:
    for n in range(3):
        state = tmp_path / f"state-{n}"
        env = {**os.environ, "DURABILITY_HOME": str(state)}
        with ExitStack() as stack:
            racers = [stack.enter_context(subprocess.Popen(
                [sys.executable, "-c", _RACER], env=env, text=True, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE)) for _ in range(6)]
            for r in racers:
                assert r.stdout is not None and r.stdout.readline() == "ready\n"
            for r in racers:
                assert r.stdin is not None
                r.stdin.write("g")
                r.stdin.close()
            outs = [r.stdout.read().strip() for r in racers if r.stdout is not None]
            assert [r.wait(timeout=60) for r in racers] == [0] * 6
        kept = (state / HOST_ID_FILE).read_text().strip()
        assert outs == [kept] * 6 and kept
        assert sorted(p.name for p in state.iterdir()) == [HOST_ID_FILE]


def test_doctor_names_the_id_and_warns_of_the_host_name_fallback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from durability.doctor.checks import _machine

    kept = _machine(os.environ)
    assert (kept.status, kept.detail) == ("ok", f"{host_id()} (kept in "
                                          f"{os.environ['DURABILITY_HOME']}/{HOST_ID_FILE})")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("DURABILITY_HOME", str(blocker / "state"))
    fallback = _machine(os.environ)
    assert fallback.status == "warn" and fallback.detail.startswith(
        f"{socket.gethostname()}: the host name, since cannot keep an id in ")
    assert "DURABILITY_HOST_ID" in fallback.next_step


@pytest.mark.parametrize("platform", ["linux", "darwin"])
def test_a_detached_or_installed_service_records_under_this_shell_s_id(
        platform: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Without it, a service would record under the state folder's id and a
    # CLI with the variable set would see none of it.
    from durability.config import Settings
    from durability.service.unit import unit_file

    plain = Settings.from_env()
    assert "DURABILITY_HOST_ID" not in plain.to_env()
    assert "DURABILITY_HOST_ID" not in unit_file(plain, platform=platform,
                                                 command="/bin/durability").text
    monkeypatch.setenv("DURABILITY_HOST_ID", "fleet-7")
    named = Settings.from_env()
    assert named.to_env()["DURABILITY_HOST_ID"] == "fleet-7"
    text = unit_file(named, platform=platform, command="/bin/durability").text
    assert ('Environment="DURABILITY_HOST_ID=fleet-7"' in text.splitlines()
            if platform == "linux" else
            "<key>DURABILITY_HOST_ID</key><string>fleet-7</string>" in text)
    env = {**os.environ, **named.to_env()}
    assert host_id(env) == "fleet-7"


def test_doctor_notes_an_id_made_under_another_host_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A renamed machine, or a state folder copied from another machine (a
    # container image): doctor cannot tell which, so it says both.
    from durability.doctor.checks import _machine

    _renamed(monkeypatch, "image-builder")
    made = host_id()
    assert _machine(os.environ).detail.endswith(f"/{HOST_ID_FILE})")
    _renamed(monkeypatch, "container 42")
    check = _machine(os.environ)
    assert check.status == "ok" and check.detail.startswith(f"{made} (kept in ")
    assert ("made under the host name image-builder, this is container-42: if this state "
            "folder was copied from another machine, set DURABILITY_HOST_ID") in check.detail
