"""``durability mcp`` fed raw lines over stdin, as a broken or hostile client
writes them: a line that is not JSON is a JSON-RPC parse error (-32700, id
null), a 100,000-deep array, an oversized line and valid JSON that is no
JSON-RPC message are each an error answer, and the server goes on answering
the next valid request.  The installed command, a real subprocess."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

from durability.mcp.stdio import MAX_LINE_BYTES
from tests.helpers import durability_exe, make_git_repo

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "raw", "version": "1"}}}


class Raw:
    """The server's stdin as bytes, and its stdout as one JSON answer a line."""

    def __init__(self, cwd: Path, log: Path) -> None:
        self.log = log
        with log.open("wb") as err:
            self.proc = subprocess.Popen([durability_exe(), "mcp"], cwd=cwd,
                                         env=dict(os.environ), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err)
        self.answers: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.answers.put(line)
        self.answers.put(b"")

    def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def request(self, id_: int, method: str, **params: Any) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method,
                              **({"params": params} if params else {})}).encode())

    def answer(self) -> dict[str, Any]:
        try:
            line = self.answers.get(timeout=60)
        except queue.Empty:
            raise AssertionError("no answer within 60 s") from None
        assert line, f"the server closed its stdout: {self.stderr()}"
        data: dict[str, Any] = json.loads(line)
        return data

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def close(self) -> tuple[int, str]:
        """Close its stdin (the client leaves) and wait for it to exit."""
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            raise AssertionError(f"the server did not exit at EOF: {self.stderr()}") from None
        self.reader.join(30)
        assert self.proc.stdout is not None
        self.proc.stdout.close()
        return code, self.stderr()


def _error(answer: dict[str, Any], code: int, id_: int | None = None) -> str:
    assert answer.get("jsonrpc") == "2.0" and "result" not in answer, answer
    assert answer["id"] == id_ and answer["error"]["code"] == code, answer
    message: str = answer["error"]["message"]
    assert message and "\n" not in message
    return message


def test_bad_lines_get_json_rpc_errors_and_the_server_goes_on(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    raw = Raw(repo, tmp_path / "mcp.log")
    try:
        raw.send(b"this is not json")
        assert "parse error" in _error(raw.answer(), -32700).lower()
        raw.send(b"[" * 100_000)
        assert "deep" in _error(raw.answer(), -32600)
        raw.send(b"\xff\xfe not utf-8 {")
        _error(raw.answer(), -32700)
        raw.send(json.dumps(INITIALIZE).encode())
        init = raw.answer()
        assert init["id"] == 1 and init["result"]["serverInfo"]["name"] == "durability", init
        raw.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')

        # An oversized line (its arguments alone past the limit) is refused
        # and skipped whole: the request after it is read from its start.
        big = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "log", "arguments": {"worktree": "x" * (MAX_LINE_BYTES + 10)}}}
        raw.send(json.dumps(big).encode())
        assert "longer than" in _error(raw.answer(), -32600)
        # Valid JSON but no JSON-RPC message: Invalid Request, with its id.
        raw.send(b'{"jsonrpc": "2.0", "id": 3, "params": {}}')
        _error(raw.answer(), -32600, 3)
        raw.send(b'[1, 2, 3]')
        _error(raw.answer(), -32600)
        # Deep inside a request that is otherwise well formed.
        raw.send(b'{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"x": '
                 + b"[" * 5000 + b"]" * 5000 + b"}}")
        assert "deep" in _error(raw.answer(), -32600)

        raw.request(5, "ping")
        assert raw.answer() == {"jsonrpc": "2.0", "id": 5, "result": {}}
        raw.request(6, "tools/list")
        listed = raw.answer()
        assert listed["id"] == 6 and {t["name"] for t in listed["result"]["tools"]} >= {"log"}
    finally:
        code, err = raw.close()
    assert code == 0, err
    assert "Traceback" not in err, err


def test_a_server_started_with_stdin_closed_ends_cleanly(tmp_path: Path) -> None:
    # fd 0 closed at the start: the event loop's own descriptor must not
    # land there and be taken for the wire (EINVAL from its selector).
    repo = make_git_repo(tmp_path / "repo")
    done = subprocess.run([durability_exe(), "mcp"], cwd=repo, env=dict(os.environ),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120,
                          preexec_fn=lambda: os.close(0))
    err = done.stderr.decode(errors="replace")
    assert (done.returncode, done.stdout) == (0, b""), err
    assert "Traceback" not in err and "Invalid argument" not in err, err
