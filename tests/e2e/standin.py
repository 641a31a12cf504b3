"""What the loopback stand-ins of the model APIs share (fake_anthropic.py,
fake_openai.py, fake_gemini.py): an HTTP server on 127.0.0.1 in a thread of
its own, and a handler base that reads JSON bodies and answers JSON.

Nothing listens beyond loopback; the port is the kernel's choice.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, Self

__all__ = ["Failure", "JsonHandler", "Recorded", "Recording", "StandIn"]


@dataclass
class Recorded:
    """One request the stand-in received."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class Failure:
    """One HTTP error answer."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class _Failing(Protocol):
    failures: list[Failure]


class StandIn:
    """The server, in a daemon thread; use as a context manager."""

    #: The serving thread's name (a stack dump tells the stand-ins apart).
    thread_name = "stand-in"

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # Not daemon threads: closing the server joins every handler, so no
        # thread outlives the test (each is bounded by the handler's timeout).
        self._server.daemon_threads = False
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name=self.thread_name, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)


class Recording(StandIn):
    """A stand-in that records every request and answers a script's failures
    first (``script.failures``, oldest first)."""

    script: _Failing

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.requests: list[Recorded] = []
        super().__init__(handler)

    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> int:
        with self._lock:
            self.requests.append(Recorded(method, path, headers, body))
            return len(self.requests)

    def next_failure(self) -> Failure | None:
        with self._lock:
            return self.script.failures.pop(0) if self.script.failures else None


class JsonHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, JSON in and out, nothing logged (the stand-in records)."""

    protocol_version = "HTTP/1.1"
    # A wedged client must not hold a server thread for ever.
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep pytest's output clean; the requests are recorded

    def _raw(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = b""
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return raw
                raw += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _body(self) -> Any:
        raw = self._raw()
        encoding = self.headers.get("Content-Encoding", "").lower()
        if encoding == "gzip":
            import gzip
            raw = gzip.decompress(raw)
        elif encoding == "zstd":
            return {"_raw": "zstd body not decoded"}
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {"_raw": raw.decode("utf-8", "replace")}

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
