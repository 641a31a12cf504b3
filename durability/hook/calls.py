"""Announced calls: what the pre-call hook records, and the calls it shows
were never finished (docs/RELIABILITY.md, "Announced calls").

Claude Code and Codex announce a tool call (``PreToolUse``), Gemini CLI too
(``BeforeTool``), before it runs.  The hook of that event appends one line to
the session's calls file in the spool folder (``<run>.calls.ndjson``, which
gap ingestion never reads): the call's id, tool and a short summary of its
input.  The post-call hook of the same call marks it finished.  A call
announced and never finished (the harness killed mid-call, a harness that
skips the post-call hook) is decided at a later hook of the same lane (one
agent of one attempt: a sub-agent's calls never decide its parent's ``Task``
call) and filed as one ``call-unfinished`` gap:

- at the end of a turn or session (``Stop``, ``SessionEnd``, ``AfterAgent``):
  every call still open;
- at any later hook, when the process that announced it is gone (the harness
  killed, the session resumed by a new one);
- at a later pre-call, when a post-call hook came after it: the harness
  started a new batch of calls, so the old one is over.

A later call of the same batch finishing first decides nothing: the harness
may run calls of one batch in parallel (Claude Code's read-only tools).

Standard library only, and no ``json``/``re``: this runs on every tool call.
The file is locked while read and appended, and emptied whenever nothing in
it is open, so it stays a few lines long.
"""

from __future__ import annotations

import fcntl
import os
import time

from durability import fastjson, ids

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["END_EVENTS", "PRE_EVENTS", "SUFFIX", "Lane", "calls_file", "harness_process",
           "kind", "process_identity", "redact", "summary"]

SUFFIX = ".calls.ndjson"
PRE_EVENTS = frozenset({"PreToolUse", "BeforeTool"})
#: A turn's or session's end: nothing announced before it is still running.
END_EVENTS = frozenset({"Stop", "SessionEnd", "AfterAgent"})
#: Ends every lane of the attempt, sub-agents' too (a turn's end ends one agent's).
_SESSION_END = frozenset({"SessionEnd"})
_SUMMARY_CHARS = 80
# Beyond this a file is not read (a lane file is a few lines; this is a guard).
_MAX_FILE = 1 << 20
# What runs between the harness and the hook (``sh -c``, the launcher).
_SHELLS = frozenset({"sh", "dash", "bash", "zsh", "ksh", "mksh", "ash", "busybox"})
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=")
_TOKEN_PREFIXES = ("sk-", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "glpat-", "xoxb-",
                   "xoxp-", "AKIA", "AIza")


def kind(event: object) -> str:
    """``pre``, ``end`` or ``post`` (anything else: the hook captures it)."""
    if event in PRE_EVENTS:
        return "pre"
    return "end" if event in END_EVENTS else "post"


def calls_file(spool_dir: str, run_id: str) -> str:
    """The run's calls file (its own name for a simple run id, else a digest)."""
    simple = 0 < len(run_id) <= 150 and run_id[0] not in ".-" and all(
        c.isascii() and (c.isalnum() or c in "_.-") for c in run_id)
    name = run_id if simple else "run-" + ids.sha256_hex(
        run_id.encode("utf-8", "surrogatepass"))[:24]
    return os.path.join(spool_dir, name + SUFFIX)


def summary(text: str | None) -> str:
    """A call's input for a record: its first ``_SUMMARY_CHARS`` characters,
    with token-shaped words replaced by ``[redacted]``."""
    text = redact(" ".join((text or "").split()))
    return text if len(text) <= _SUMMARY_CHARS else text[:_SUMMARY_CHARS - 1] + "…"


def redact(text: str) -> str:
    """``text`` with each word (or ``name=value`` value) that looks like a
    credential replaced: a known key prefix (``sk-``, ``ghp_``, ``AKIA``, ...)
    followed by at least 12 more characters, or 32 or more characters of
    letters, digits and ``_-+=`` holding both letters and digits.  A rule of
    thumb, not a scanner: it errs towards hiding."""
    words = text.split(" ")
    for i, word in enumerate(words):
        head, sep, value = word.partition("=") if "=" in word.strip("=") else ("", "", word)
        bare = value.strip("'\"")
        if _token_shaped(bare) or ("." in bare and any(map(_token_shaped, bare.split(".")))):
            words[i] = head + sep + value.replace(bare, "[redacted]")
    return " ".join(words)


def _token_shaped(word: str) -> bool:
    if not word or not set(word) <= _TOKEN_CHARS:
        return False
    if any(word.startswith(p) and len(word) >= len(p) + 12 for p in _TOKEN_PREFIXES):
        return True
    return len(word) >= 32 and any(c.isdigit() for c in word) and any(c.isalpha() for c in word)


def harness_process() -> str | None:
    """The process that ran this hook, as ``pid:start``: the first ancestor
    that is not a shell (Claude Code, Codex, Gemini CLI, or whatever runs the
    hook).  None where ``/proc`` cannot say (not Linux)."""
    pid = os.getppid()
    for _ in range(8):
        found = _proc_stat(pid)
        if found is None:
            return None
        comm, parent, start = found
        if comm not in _SHELLS:
            return f"{pid}:{start}"  # as process_identity(pid)
        if parent <= 1:
            return None
        pid = parent
    return None


def process_identity(pid: int) -> str | None:
    """``pid:start`` of a running process (None where ``/proc`` cannot say)."""
    found = _proc_stat(pid)
    return None if found is None else f"{pid}:{found[2]}"


def _proc_stat(pid: int) -> tuple[str, int, str] | None:
    """A process's name, parent and start time, from ``/proc/PID/stat``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    name, _, rest = raw.partition(" (")[2].rpartition(")")
    fields = rest.split()
    try:
        return name, int(fields[1]), fields[19]
    except (IndexError, ValueError):
        return None


def _gone(proc: object) -> bool:
    """Whether the process recorded as ``pid:start`` has ended (a pid used
    again by another process has another start time)."""
    if not isinstance(proc, str) or ":" not in proc or not os.path.isdir("/proc/self"):
        return False
    pid, _, start = proc.partition(":")
    if not pid.isdigit():
        return False
    found = _proc_stat(int(pid))
    return found is None or found[2] != start


class Lane:
    """One run's calls file, open and locked, with what it says about one
    lane (``key``: node, iteration, attempt and agent)."""

    def __init__(self, path: str, key: str) -> None:
        self.path = path
        self.key = key
        self.fd = -1
        self.calls: dict[tuple[str, str], dict[str, Any]] = {}
        self.lines: list[dict[str, Any]] = []

    def open(self, *, create: bool) -> bool:
        """Lock and read the file; False when there is none (and ``create``
        is False: a post-call hook of an install without the pre-call event)."""
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            self.fd = os.open(self.path, flags | (os.O_CREAT if create else 0), 0o600)
        except FileNotFoundError:
            return False
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        size = os.fstat(self.fd).st_size
        data = os.pread(self.fd, min(size, _MAX_FILE), 0) if size else b""
        for raw in data.split(b"\n"):
            self._apply(raw)
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _apply(self, raw: bytes) -> None:
        if not raw.strip():
            return
        try:
            line = fastjson.loads(raw)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return  # a torn line (a writer killed mid-line): skipped
        if isinstance(line, dict) and isinstance(line.get("call"), str):
            self._take(line)

    def _take(self, line: dict[str, Any]) -> None:
        name = (str(line.get("lane")), line["call"])
        k = line.get("k")
        entry = self.calls.get(name)
        if k == "pre":
            if entry is None or entry["finished"]:
                self.calls.pop(name, None)  # the same call again, once finished: a new one
                self.calls[name] = {**line, "finished": False, "decided": False,
                                    "told": False, "posted_after": False}
        elif k == "post":
            for other in self.calls.values():
                if other["lane"] == name[0]:
                    other["posted_after"] = True
            if entry is not None:
                entry["finished"] = True
        elif k in ("gap", "told") and entry is not None:
            entry["decided"] = True
            entry["told"] = entry["told"] or k == "told"

    def add(self, **line: Any) -> None:
        """Note ``line``; written by ``save``."""
        line["lane"] = self.key
        self.lines.append(line)
        self._take(line)

    def save(self) -> None:
        """Write the lines added, or empty the file when nothing in it is open
        any more (every call finished, or filed and named in a label)."""
        if all(e["finished"] or e["told"] for e in self.calls.values()):
            if os.fstat(self.fd).st_size:
                os.ftruncate(self.fd, 0)
            return
        if not self.lines:
            return
        data = "".join(fastjson.dumps(line) + "\n" for line in self.lines).encode("ascii")
        # A torn last line (a writer killed mid-line) is ended first.
        size = os.fstat(self.fd).st_size
        if size and os.pread(self.fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        os.write(self.fd, data)

    def unfinished(self, call: str | None, event_kind: str, event: object) -> list[dict[str, Any]]:
        """The calls this hook shows were never finished (not yet filed)."""
        found = []
        for (lane, name), entry in self.calls.items():
            if not self._mine(lane, event) or name == call or entry["finished"] \
                    or entry["decided"]:
                continue
            if event_kind == "end" or _gone(entry.get("proc")) or (
                    event_kind == "pre" and entry["posted_after"]):
                found.append(entry)
        return found

    def untold(self, event: object) -> list[dict[str, Any]]:
        """Calls filed as unfinished whose note no capture's label holds yet."""
        return [e for e in self.calls.values()
                if e["decided"] and not e["told"] and self._mine(e["lane"], event)]

    def _mine(self, lane: str, event: object) -> bool:
        """Whether this hook speaks for ``lane``: its own, or at a session's
        end every lane of its attempt."""
        prefix = self.key.rsplit("\x1f", 1)[0] + "\x1f"
        return lane == self.key or (event in _SESSION_END and lane.startswith(prefix))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def lane_key(node_id: str, iteration: int, attempt: int, agent: Mapping[str, str]) -> str:
    return "\x1f".join([node_id, str(iteration), str(attempt), agent.get("agent_id", "")])
