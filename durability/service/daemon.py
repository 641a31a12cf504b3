"""Running the service: in the foreground with signals turned into a clean
shutdown, or detached in the background."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from durability.config import Settings
from durability.ground import client
from durability.ground.errors import ServiceError, ServiceTimeout, ServiceUnreachable
from durability.ground.paths import ensure_private_dir
from durability.service.record import recorded_pid
from durability.service.server import Service

__all__ = ["Started", "Stopped", "run_foreground", "start_detached", "status", "stop",
           "with_socket"]

# How long `serve --detach` waits for the child to answer a ping.
_READY_TIMEOUT_S = 20.0
# How long `stop` waits for a SIGTERMed service to drain its queue and leave:
# a capture in flight is bounded by the jj timeout, so this is the default
# `stop --timeout` and the point after which it says so (or kills, with --kill).
STOP_TIMEOUT_S = 30.0


@dataclasses.dataclass(frozen=True)
class Started:
    """What ``serve --detach`` found or did."""

    pid: int
    socket: str
    already_running: bool


@dataclasses.dataclass(frozen=True)
class Stopped:
    """What ``durability stop`` did: ``was_running`` False when nothing answered."""

    socket: str
    was_running: bool
    pid: int | None = None
    killed: bool = False
    waited_s: float = 0.0


def with_socket(settings: Settings, path: Path) -> Settings:
    return dataclasses.replace(settings, socket_path=path.expanduser().absolute())


def run_foreground(settings: Settings, *, autostarted: bool = False,
                   warm: Sequence[Path] = ()) -> None:
    """Serve until SIGTERM or SIGINT (or, by itself, until its state folder
    is gone or, ``autostarted``, it was idle long enough), then drain and
    release the socket."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s durability %(levelname)s %(message)s")
    service = Service(settings, autostarted=autostarted)

    def stop(signum: int, frame: FrameType | None) -> None:
        service.request_stop()

    # Before start(): a SIGTERM that arrives once the socket answers must
    # still be a clean shutdown that removes the socket.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with service:
        print(f"durability: serving on {settings.socket_path}", file=sys.stderr, flush=True)
        service.warm(warm)
        service.serve_forever()


def start_detached(settings: Settings) -> Started:
    """Start the service in its own session, once it answers; a service that
    already answers on the socket is the answer (idempotent: nothing started)."""
    running = _ping(settings)
    if running is not None:
        return Started(_pid(running, 0), str(settings.socket_path), already_running=True)
    recorded = recorded_pid(settings.socket_path, settings.state_dir)
    if recorded is not None:  # its socket is gone: it binds it again on its own
        return Started(recorded, str(settings.socket_path), already_running=True)
    return _spawn(settings)


def status(settings: Settings) -> dict[str, object] | None:
    """The running service's ping answer (pid, version, counters); for one
    that listens but does not answer, ``{"pid": N, "answering": False}``;
    for one whose socket is gone (found by its lock's pid record), the same
    with ``"socket_missing": True``; None when no service runs."""
    answer = _ping(settings)
    if answer is not None:
        return {**answer, "answering": True}
    pid = client.listener_pid(settings.socket_path)
    if pid:
        return {"pid": pid, "answering": False}
    pid = recorded_pid(settings.socket_path, settings.state_dir)
    return {"pid": pid, "answering": False, "socket_missing": True} if pid else None


def stop(settings: Settings, *, timeout_s: float = STOP_TIMEOUT_S,
         kill: bool = False) -> Stopped:
    """Ask the service on the socket to stop (SIGTERM: it drains its queue and
    removes the socket), and wait for it to be gone, at most ``timeout_s``.

    The pid comes from the service's ping answer or, when it cannot answer,
    from the kernel's record of the listener, else from the pid record in
    its lock file (``record``); all are believed only from a process of this
    user (peer credentials, the record's owner and the pid's start time), so
    a signal is never sent to another user's process.  Past the timeout it raises
    ``ServiceError``, or with ``kill`` sends SIGKILL and says so."""
    path = str(settings.socket_path)
    answer = _ping(settings)
    # A service that cannot answer (stopped, flooded) is found by the kernel;
    # one whose socket is gone, by its pid record (its lock's, or the state
    # folder's when the socket's folder went too).
    pid = (_pid(answer, 0) if answer is not None
           else client.listener_pid(path)
           or recorded_pid(settings.socket_path, settings.state_dir) or 0)
    if pid <= 0:
        return Stopped(path, was_running=False)
    started = time.monotonic()
    _signal(pid, signal.SIGTERM)
    if _wait_gone(pid, settings, started + timeout_s):
        return Stopped(path, True, pid, waited_s=round(time.monotonic() - started, 3))
    if not kill:
        raise ServiceError(f"the service (pid {pid}) did not stop within {timeout_s:g}s; "
                           "try again with --kill")
    _signal(pid, signal.SIGKILL)
    _wait_gone(pid, settings, time.monotonic() + 5)
    return Stopped(path, True, pid, killed=True, waited_s=round(time.monotonic() - started, 3))


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # it left on its own in between: that is what we wanted


def _wait_gone(pid: int, settings: Settings, deadline: float) -> bool:
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (our own detached child not yet reaped) has left
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return True


def _pid(answer: dict[str, object], default: int) -> int:
    pid = answer.get("pid")
    return pid if isinstance(pid, int) else default


def _spawn(settings: Settings) -> Started:
    """Start a detached service and wait until the socket answers.  When two
    starts race, the loser's child finds the socket taken and exits: the
    winner's answer is then reported as already running, not as a failure."""
    ensure_private_dir(settings.state_dir)
    env = {**os.environ, **settings.to_env()}
    with open(settings.log_path, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-P", "-m", "durability", "serve"], env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True, close_fds=True,
        )
    socket = str(settings.socket_path)
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = _ping(settings)
        if answer is not None:
            pid = _pid(answer, child.pid)
            return Started(pid, socket, already_running=pid != child.pid)
        if child.poll() is not None:
            raise ServiceError(f"the service exited at start; see {settings.log_path}: "
                               f"{_tail(settings.log_path)}")
        time.sleep(0.05)
    child.kill()
    raise ServiceError(f"the service did not answer within {_READY_TIMEOUT_S:g}s")


def _ping(settings: Settings) -> dict[str, object] | None:
    try:
        answer = client.call(settings.socket_path, {"v": 1, "op": "ping"}, timeout_s=2)
    except (ServiceUnreachable, ServiceTimeout):
        return None
    return answer if answer.get("ok") else None


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"
