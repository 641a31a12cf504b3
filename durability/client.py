"""A client for the snapshot service.  Standard library only: the hook uses
it on every tool call, so it must import fast."""

from __future__ import annotations

import _socket as socket  # the C module: socket.py costs ~3 ms (enum, selectors)
import os
import time

from durability import fastjson as json  # json imports re: ~6 ms per hook call

# Not `from typing import TYPE_CHECKING`: importing typing costs ~3 ms on
# every hook call, and the annotations need it only when type checking.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Busy", "ConnectionLost", "Unreachable", "WaitTimeout", "call", "capture_request",
           "peer_uid"]

# Matches the service's cap; a longer line is never sent.
MAX_LINE = 64 * 1024


class Unreachable(Exception):
    """No service answers on the socket (none running, or a stale file)."""


class Busy(Unreachable):
    """The service is over its connection limits and refused this one."""


class ConnectionLost(Exception):
    """The service accepted the request and went away before answering."""


class WaitTimeout(Exception):
    """The service did not answer within the time allowed."""


def call(
    socket_path: str | os.PathLike[str], request: dict[str, Any], *, timeout_s: float,
    connect_timeout_s: float = 2.0,
) -> dict[str, Any]:
    """Send one request and return the service's response.

    ``connect_timeout_s`` bounds the connect alone: a stopped or flooded
    service's full backlog makes connect wait, and the hook would rather
    capture in-process than spend its budget there.
    """
    deadline = time.monotonic() + timeout_s
    line = json.dumps(request).encode() + b"\n"
    if len(line) > MAX_LINE:
        raise ValueError("request too large")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(min(timeout_s, connect_timeout_s))
        try:
            sock.connect(os.fspath(socket_path))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            raise Unreachable(f"no service on {socket_path}: {exc.strerror}") from None
        except OSError as exc:
            raise Unreachable(f"cannot connect to {socket_path}: {exc}") from None
        _check_peer(sock, socket_path)
        try:
            sock.sendall(line)
            response = _read_response(sock, deadline)
        except TimeoutError:
            raise WaitTimeout(f"no answer from the service within {timeout_s:g}s") from None
        except OSError as exc:
            raise ConnectionLost(f"service connection lost: {exc}") from None
    finally:
        sock.close()
    error = response.get("error")
    if isinstance(error, dict) and error.get("code") == "service-busy":
        raise Busy(f"the service on {socket_path} is busy: {error.get('message')}")
    return response


def capture_request(
    *, request_id: str, run_id: str, node_id: str, iteration: int, attempt: int,
    worktree: str, source: str, tool_use_id: str | None, label: str | None, timeout_ms: int,
    deadline_ms: int | None = None,
) -> dict[str, Any]:
    """A ``capture`` request in the wire format (``durability.protocol``);
    ``deadline_ms`` (ms since the epoch) only when the caller stops waiting then."""
    request = {"v": 1, "op": "capture", "request_id": request_id, "run_id": run_id,
               "node_id": node_id, "iteration": iteration, "attempt": attempt,
               "worktree": worktree, "source": source, "tool_use_id": tool_use_id,
               "label": label, "timeout_ms": timeout_ms}
    if deadline_ms is not None:
        request["deadline_ms"] = deadline_ms
    return request


def _check_peer(sock: socket.socket, socket_path: object) -> None:
    """Only a service run by this user is believed: another user who took the
    socket's place first could answer "captured" while nothing was."""
    uid = peer_uid(sock)
    if uid is not None and uid != os.getuid():
        raise Unreachable(f"the service on {socket_path} is run by uid {uid}, not by you")


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux's
    SO_PEERCRED); None where the platform cannot tell, and then the private
    0700 folder is the guard.  Used by both ends: the service refuses other
    users, the client refuses a service run by another user."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    import sys

    # struct ucred {pid_t pid; uid_t uid; gid_t gid;}, read without importing struct.
    creds = sock.getsockopt(socket.SOL_SOCKET, opt, 12)
    return int.from_bytes(creds[4:8], sys.byteorder)


def _read_response(sock: socket.socket, deadline: float) -> dict[str, Any]:
    buf = b""
    while b"\n" not in buf:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionLost("service closed the connection without answering")
        buf += chunk
        if len(buf) > MAX_LINE:
            raise ConnectionLost("oversized response")
    try:
        response = json.loads(buf.split(b"\n", 1)[0])
    except ValueError:
        raise ConnectionLost("malformed response") from None
    if not isinstance(response, dict):
        raise ConnectionLost("malformed response")
    return response
