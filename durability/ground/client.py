"""A client for the snapshot service.  Standard library only: the hook uses
it on every tool call, so it must import fast."""

from __future__ import annotations

import _socket as socket  # the C module: socket.py costs ~3 ms (enum, selectors)
import os
import time

from durability.ground import fastjson as json  # json imports re: ~6 ms per hook call
from durability.ground.errors import (
    ConnectionLost,
    ServiceBusy,
    ServiceTimeout,
    ServiceUnreachable,
    from_code,
)

# Not `from typing import TYPE_CHECKING`: importing typing costs ~3 ms on
# every hook call, and the annotations need it only when type checking.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["call", "capture_request", "check_answer", "listener_pid", "peer_uid"]

# Matches the service's cap; a longer line is never sent.
MAX_LINE = 64 * 1024


def call(
    socket_path: str | os.PathLike[str], request: dict[str, Any], *, timeout_s: float,
    connect_timeout_s: float = 2.0,
) -> dict[str, Any]:
    """Send one request and return the service's response.

    Raises ``ServiceUnreachable`` (no service, or one run by another user),
    its ``ServiceBusy`` (over its connection limits) and ``ConnectionLost``
    (it took the request and went away), or ``ServiceTimeout`` (no answer
    in ``timeout_s``), all from ``durability.ground.errors``.  ``connect_timeout_s``
    bounds the connect alone: a stopped or flooded service's full backlog
    makes connect wait, and the hook would rather capture in-process than
    spend its budget there.
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
            raise ServiceUnreachable(f"no service on {socket_path}: {exc.strerror}") from None
        except (TimeoutError, BlockingIOError) as exc:
            # A full backlog: a service is there but stopped or flooded.  Not
            # "no service" (a hook would start another beside it).
            raise ServiceBusy(f"the service on {socket_path} does not accept: {exc}") from None
        except OSError as exc:
            raise ServiceUnreachable(f"cannot connect to {socket_path}: {exc}") from None
        _check_peer(sock, socket_path)
        try:
            sock.sendall(line)
            response = _read_response(sock, deadline)
        except TimeoutError:
            raise ServiceTimeout(f"no answer from the service within {timeout_s:g}s") from None
        except OSError as exc:
            raise ConnectionLost(f"service connection lost: {exc}") from None
    finally:
        sock.close()
    error = response.get("error")
    if isinstance(error, dict) and error.get("code") == "service-busy":
        raise ServiceBusy(f"the service on {socket_path} is busy: {error.get('message')}")
    return response


def capture_request(
    *, request_id: str, run_id: str, node_id: str, iteration: int, attempt: int,
    worktree: str, source: str, tool_use_id: str | None, label: str | None, timeout_ms: int,
    deadline_ms: int | None = None, agent: dict[str, str] | None = None,
    call: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``capture`` request in the wire format (``durability.service.protocol``);
    ``deadline_ms`` (ms since the epoch) only when the caller stops waiting then."""
    request = {"v": 1, "op": "capture", "request_id": request_id, "run_id": run_id,
               "node_id": node_id, "iteration": iteration, "attempt": attempt,
               "worktree": worktree, "source": source, "tool_use_id": tool_use_id,
               "label": label, "timeout_ms": timeout_ms}
    if deadline_ms is not None:
        request["deadline_ms"] = deadline_ms
    if agent:  # harness, agent_id, agent_type: only those the harness sent
        request.update(agent)
    if call:  # a hook's tool call: event, tool_name, transcript_path, transcript_bytes
        request.update(call)
    return request


def _check_peer(sock: socket.socket, socket_path: object) -> None:
    """Only a service run by this user is believed: another user who took the
    socket's place first could answer "captured" while nothing was."""
    uid = peer_uid(sock)
    if uid is not None and uid != os.getuid():
        raise ServiceUnreachable(f"the service on {socket_path} is run by uid {uid}, not by you")


def listener_pid(socket_path: str | os.PathLike[str]) -> int | None:
    """The pid of this user's process that listens on ``socket_path``, from the
    kernel (SO_PEERCRED) and without a request, so it is known even for a
    service that is stopped or flooded and cannot answer; None when nothing
    listens, the platform cannot tell, or the listener is another user's."""
    opt = getattr(socket, "SO_PEERCRED", None)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(1.0)
        sock.connect(os.fspath(socket_path))
        if opt is None or peer_uid(sock) != os.getuid():
            return None
        import sys

        creds = sock.getsockopt(socket.SOL_SOCKET, opt, 12)
        return int.from_bytes(creds[0:4], sys.byteorder) or None
    except OSError:
        return None
    finally:
        sock.close()


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


def check_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """An answer that says ``ok``; any other raises the error its code names
    (``errors.from_code``): the one place an error answer becomes an exception."""
    if answer.get("ok"):
        return answer
    error = answer.get("error") or {}
    raise from_code(str(error.get("code") or "internal-error"), str(error.get("message")))
