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
from pathlib import Path
from types import FrameType

from durability import client
from durability.config import Settings
from durability.errors import ServiceError, ServiceRunning, ServiceTimeout, ServiceUnreachable
from durability.paths import ensure_private_dir
from durability.service.server import Service

__all__ = ["run_foreground", "start_detached", "with_socket"]

# How long `serve --detach` waits for the child to answer a ping.
_READY_TIMEOUT_S = 20.0


def with_socket(settings: Settings, path: Path) -> Settings:
    return dataclasses.replace(settings, socket_path=path.expanduser().absolute())


def run_foreground(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then drain and release the socket."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s durability %(levelname)s %(message)s")
    service = Service(settings)

    def stop(signum: int, frame: FrameType | None) -> None:
        service.request_stop()

    # Before start(): a SIGTERM that arrives once the socket answers must
    # still be a clean shutdown that removes the socket.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with service:
        print(f"durability: serving on {settings.socket_path}", file=sys.stderr, flush=True)
        service.serve_forever()


def start_detached(settings: Settings) -> int:
    """Start the service in its own session; return its pid once it answers."""
    if _ping(settings) is not None:
        raise ServiceRunning(f"a service is already answering on {settings.socket_path}")
    ensure_private_dir(settings.state_dir)
    env = {**os.environ, "DURABILITY_SOCKET": str(settings.socket_path),
           "DURABILITY_HOME": str(settings.state_dir),
           "DURABILITY_SPOOL_DIR": str(settings.spool_dir)}
    with open(settings.log_path, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "durability", "serve"], env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True, close_fds=True,
        )
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        answer = _ping(settings)
        if answer is not None:
            pid = answer.get("pid")
            return pid if isinstance(pid, int) else child.pid
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
