"""Announced calls: what the pre-call hook records, and the calls it shows
were never finished (docs/RELIABILITY.md, "Announced calls").

Claude Code and Codex announce a tool call (``PreToolUse``), Gemini CLI too
(``BeforeTool``), before it runs.  The hook of that event appends one line to
the run's calls file in the spool folder (``<run>.calls.ndjson``; the spool's
gap lines are elsewhere): the call's id, tool, a short summary of its input
and the process that announced it.  The post-call hook of the same call marks
it finished.  A call announced and never finished (the harness killed
mid-call, a harness that skips the post-call hook) is filed as one
``call-unfinished`` gap by the first hook of the run that shows it is over:

- any later hook, when the process that announced it is gone (the harness
  killed; the session resumed, or the attempt retried, by a new one);
- in its lane (one agent of one attempt: a sub-agent's calls never decide
  its parent's ``Task`` call), the end of a turn or session (``Stop``,
  ``SessionEnd``, ``AfterAgent``); where the announcing process cannot be
  known (no ``/proc``), also a later pre-call hook after some post-call hook
  (the harness started a new batch, so the old one is over).

While its harness lives, later calls starting and finishing decide nothing:
a harness may run calls at once (Claude Code starts read-only ones as they
stream in, beside a long one still running) and they finish in any order.  Gap
ingestion (``abandoned``) also files the calls whose process is gone, for a
session never resumed.

Standard library only, and no ``json``/``re``: this runs on every tool call.
The file is locked while read and appended, and removed whenever nothing in
it is open, so a finished session leaves none; past ``_COMPACT_AT`` a hook
rewrites it with only the calls still open (one call left open would keep
every later line, and each hook reads them all).
"""

from __future__ import annotations

import fcntl
import os
import sys
import time

from durability.ground import fastjson, ids

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["DENIED_EVENTS", "END_EVENTS", "PRE_EVENTS", "SUFFIX", "Lane", "abandoned", "calls_file",
           "harness_process", "kind", "mark_filed", "process_identity", "redact", "summary",
           "unfinished_gap"]

SUFFIX = ".calls.ndjson"
PRE_EVENTS = frozenset({"PreToolUse", "BeforeTool"})
#: A turn's or session's end: nothing announced before it is still running.
END_EVENTS = frozenset({"Stop", "SessionEnd", "AfterAgent"})
#: A call the harness refused to run (Claude Code's auto mode denied it): it is
#: over, and ran nothing (no capture, no gap).
DENIED_EVENTS = frozenset({"PermissionDenied"})
#: Ends every lane of the attempt, sub-agents' too (a turn's end ends one agent's).
_SESSION_END = frozenset({"SessionEnd"})
_SUMMARY_CHARS = 80
# Beyond this a file is not read (a lane file is a few lines; this is a guard).
_MAX_FILE = 1 << 20
# Past this a save rewrites the file with only the calls still open, so a
# hook's cost does not grow with the session (one open call keeps it).
_COMPACT_AT = 16 << 10
# What may run between the harness and the hook, and ends with the hook
# (``sh -c``, the launcher, a wrapper): never taken for the harness, whose end
# would otherwise mark every call it announced as over.
_SHELLS = frozenset({"sh", "dash", "bash", "zsh", "ksh", "mksh", "ash", "busybox", "env",
                     "timeout", "nice", "nohup", "stdbuf", "setsid", "flock"})
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+=")
_TOKEN_PREFIXES = ("sk-", "ghp_", "gho_", "ghs_", "ghu_", "github_pat_", "glpat-", "xoxb-",
                   "xoxp-", "AKIA", "AIza")


def kind(event: object) -> str:
    """``pre``, ``denied``, ``end`` or ``post`` (anything else: the hook
    captures it)."""
    if event in PRE_EVENTS:
        return "pre"
    if event in DENIED_EVENTS:
        return "denied"
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
    """The process that ran this hook, as ``process_identity`` gives it:
    the ancestor reading the hook's output (Claude Code, Codex, Gemini CLI,
    or whatever runs the hook; each reads what its hooks print).  What runs
    between it and the hook (``sh -c``, a shebang script, ``uv run``, a
    python or node wrapper) hands the hook its own output and ends with the
    hook: taken for the harness, its end would make every call still running
    at the session's next hook look killed.  Decided by ancestry and open
    files, never by how long anything took to start (a loaded machine starts
    a wrapper slowly).  None where that cannot be known (not Linux, output
    not a pipe or socket, another user's harness): the session's ends and
    new batches decide then (``Lane.unfinished``)."""
    ancestors = _ancestors()
    if not ancestors:
        return None
    for fd in (1, 2):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:"):
            pid = _socket_peer(fd)  # node (libuv) gives its children socket pairs
            if pid is not None and pid in ancestors:
                return process_identity(pid)
        elif link.startswith("pipe:"):
            for pid in ancestors:
                reading = _reads_pipe(pid, link)
                if reading is None:
                    break  # its open files cannot be read: nor those above it
                if reading:
                    return process_identity(pid)
    return None


def _ancestors() -> list[int]:
    """This process's ancestors, nearest first, shells left out (none of
    them is a harness), up to a dozen levels and never ``init``."""
    found: list[int] = []
    pid = os.getppid()
    for _ in range(12):
        if pid <= 1:
            break
        stat = _proc_stat(pid)
        if stat is None:
            break
        if stat[0] not in _SHELLS:
            found.append(pid)
        pid = stat[1]
    return found


def _reads_pipe(pid: int, link: str) -> bool | None:
    """Whether ``pid`` holds the read end of the pipe ``link`` names (a
    helper holds only its write end: the hook's output is its output); None
    when its open files cannot be listed."""
    folder = f"/proc/{pid}/fd"
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    for name in names:
        try:
            if os.readlink(f"{folder}/{name}") != link:
                continue
            with open(f"/proc/{pid}/fdinfo/{name}", "rb") as f:
                info = f.read(4096)
        except OSError:
            continue
        for line in info.split(b"\n"):
            if line.startswith(b"flags:") and \
                    int(line[6:].strip() or b"1", 8) & os.O_ACCMODE == os.O_RDONLY:
                return True
    return False


def _socket_peer(fd: int) -> int | None:
    """The pid that made the socket pair ``fd`` is one end of (its
    ``SO_PEERCRED``: the harness, which made it for the hook's output)."""
    import _socket  # the C module: ``socket`` loads enum, too heavy for a hook

    try:
        sock = _socket.socket(fileno=os.dup(fd))
    except OSError:
        return None
    try:
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError:
        return None
    finally:
        sock.close()
    pid = int.from_bytes(raw[:4], sys.byteorder)
    return pid or None


def process_identity(pid: int) -> str | None:
    """``pid:start:namespace`` of a running process (its pid namespace: a
    reader in another cannot see it, and must not judge it gone); None where
    ``/proc`` cannot say."""
    found = _proc_stat(pid)
    return None if found is None else f"{pid}:{found[2]}:{_namespace()}"


def _namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid").partition("[")[2].rstrip("]")
    except OSError:
        return ""


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
    """Whether the process recorded as ``pid:start:namespace`` has ended (a
    pid used again by another process has another start time); False when
    this process cannot tell (another pid namespace, no ``/proc``)."""
    parts = proc.split(":") if isinstance(proc, str) else []
    if len(parts) != 3 or not parts[0].isdigit() or parts[2] != _namespace() \
            or not os.path.isdir("/proc/self"):
        return False
    found = _proc_stat(int(parts[0]))
    return found is None or found[2] != parts[1]


class Lane:
    """One run's calls file, open and locked, with what it says about one
    lane (``key``: node, iteration, attempt and agent)."""

    def __init__(self, path: str, key: str) -> None:
        self.path = path
        self.key = key
        self.fd = -1
        self.calls: dict[tuple[str, str], dict[str, Any]] = {}
        self.lines: list[dict[str, Any]] = []

    def open(self, *, create: bool, wait: bool = True) -> bool:
        """Lock and read the file; False when there is none (and ``create``
        is False: a post-call hook of an install without the pre-call event),
        or, unless ``wait``, when another process holds it."""
        flags = os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        for _ in range(10):
            try:
                self.fd = os.open(self.path, flags | (os.O_CREAT if create else 0), 0o600)
            except FileNotFoundError:
                return False
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                self.close()
                return False
            if self._still_there():
                break
            self.close()  # removed (settled) while this waited: open it again
        else:
            return False
        size = os.fstat(self.fd).st_size
        data = os.pread(self.fd, min(size, _MAX_FILE), 0) if size else b""
        for raw in data.split(b"\n"):
            self._apply(raw)
        return True

    def _still_there(self) -> bool:
        """Whether the file locked is still the one at the path."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        held = os.fstat(self.fd)
        return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)

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
                                    "told": False, "posted_after": bool(line.get("pa"))}
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
        """Note ``line`` (of this lane unless it names one); written by ``save``."""
        line.setdefault("lane", self.key)
        self.lines.append(line)
        self._take(line)

    def save(self) -> None:
        """Write the lines added, or remove the file when nothing in it is
        open any more (every call finished, or filed and named in a label):
        the spool folder keeps no file per finished session.  A hook waiting
        for the lock meanwhile opens the path again (``open``)."""
        if all(e["finished"] or e["told"] for e in self.calls.values()):
            os.unlink(self.path)
            return
        if not self.lines:
            return
        data = "".join(fastjson.dumps(line) + "\n" for line in self.lines).encode("ascii")
        # A torn last line (a writer killed mid-line) is ended first.
        size = os.fstat(self.fd).st_size
        if size + len(data) > _COMPACT_AT and self._compact():
            return
        if size and os.pread(self.fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        os.write(self.fd, data)

    def _compact(self) -> bool:
        """Replace the file, atomically and under its lock, with the lines of
        the calls still open (what a reader would make of them is the same: a
        finished call is no longer read; a post-call hook after an open one is
        its ``pa``); False when that would not halve it (keep appending)."""
        kept = []
        for entry in self.calls.values():
            if entry["finished"] or entry["told"]:
                continue
            line = {k: v for k, v in entry.items()
                    if k not in ("finished", "decided", "told", "posted_after", "pa")}
            if entry["posted_after"]:
                line["pa"] = True
            kept.append(line)
            if entry["decided"]:
                kept.append({"k": "gap", "call": entry["call"], "lane": entry["lane"]})
        data = "".join(fastjson.dumps(line) + "\n" for line in kept).encode("ascii")
        if len(data) * 2 > _COMPACT_AT:
            return False
        tmp = f"{self.path}.{os.getpid()}.tmp"
        fd = -1
        try:
            try:
                os.unlink(tmp)  # left by a killed hook of the same pid
            except FileNotFoundError:
                pass
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600)
            os.write(fd, data)
            os.close(fd)
            fd = -1
            # Hooks waiting for the old file's lock then find another file at
            # the path, and open that (``open``).
            os.replace(tmp, self.path)
        except OSError:  # a file that cannot be written: append as before
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return False
        return True

    def unfinished(self, call: str | None, event_kind: str, event: object) -> list[dict[str, Any]]:
        """The calls this hook shows were never finished (not yet filed)."""
        found = []
        for (lane, name), entry in self.calls.items():
            if entry["finished"] or entry["decided"] or (lane, name) == (self.key, call):
                continue
            # A new batch is evidence only where the harness cannot be
            # watched: Claude Code starts read-only calls as they stream in,
            # beside a long one still running (a Task, a slow search).
            new_batch = event_kind == "pre" and entry["posted_after"] and not entry.get("proc")
            if _gone(entry.get("proc")) or (self._mine(lane, event) and (
                    event_kind == "end" or new_batch)):
                found.append(entry)
        return found

    def untold(self, worktree: str) -> list[dict[str, Any]]:
        """Calls filed as unfinished in ``worktree`` whose note no capture's
        label holds yet (the next capture of it holds what they wrote)."""
        return [e for e in self.calls.values()
                if e["decided"] and not e["told"] and e.get("worktree") == worktree]

    def _mine(self, lane: str, event: object) -> bool:
        """Whether this hook speaks for ``lane``: its own, or at a session's
        end every lane of its attempt."""
        prefix = self.key.rsplit("\x1f", 1)[0] + "\x1f"
        return lane == self.key or (event in _SESSION_END and lane.startswith(prefix))


def unfinished_gap(entry: dict[str, Any]) -> dict[str, Any]:
    """The ``call-unfinished`` gap of an announced call, as a spool line;
    its request id is the call's, so two deciding it file one gap.  Raises
    ``ValueError`` for a line no hook of ours wrote."""
    from durability.gaps import spool  # off the path of a hook that files nothing

    node_id, iteration, attempt, _agent = str(entry.get("lane")).split("\x1f")
    run_id = ids.validate_id(entry.get("run"), "run id")
    ids.validate_id(node_id, "node id")
    count, tries = ids.validate_count(iteration, "iteration", 0), \
        ids.validate_count(attempt, "attempt", 1)
    when = time.strftime("%H:%M:%S", time.localtime(int(entry.get("ts") or 0) / 1000))
    what = f"{entry.get('tool')} {entry.get('summary') or ''}".strip()
    return spool.gap_record(
        run_id=run_id, reason="call-unfinished",
        request_id=ids.call_request_id(run_id, node_id, count, tries, str(entry["call"]),
                                       "call-unfinished"),
        # A call denied or blocked before it ran gets no post-call hook
        # either (Claude Code asks its hooks before its permission checks).
        detail=(f"{what} was announced at {when} and never finished (killed, denied or "
                "blocked before its post-call hook); anything it wrote is in the next "
                "checkpoint, whose label names it"),
        node_id=node_id, iteration=count, attempt=tries, worktree=entry.get("worktree"),
        source="hook", tool_use_id=entry.get("tid"))


def abandoned(directory: str) -> list[tuple[str, dict[str, Any]]]:
    """The open calls, in every calls file of ``directory``, whose announcing
    process is gone: for gap ingestion, so that a session killed and never
    resumed still has its gap.  A file a hook holds right now is left for
    the next ingest (that hook decides it anyway)."""
    found: list[tuple[str, dict[str, Any]]] = []
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(SUFFIX))
    except OSError:
        return found
    for name in names:
        path = os.path.join(directory, name)
        lane = Lane(path, "")
        try:
            if lane.open(create=False, wait=False):
                found += [(path, e) for e in lane.unfinished(None, "post", None)]
        except OSError:
            continue
        finally:
            lane.close()
    return found


def mark_filed(found: list[tuple[str, dict[str, Any]]]) -> None:
    """Note in their files that these calls' gaps are in the store (so a
    later hook names them in a label, and files nothing again)."""
    for path in sorted({p for p, _ in found}):
        lane = Lane(path, "")
        try:
            if lane.open(create=False):
                for _, entry in (x for x in found if x[0] == path):
                    lane.add(k="gap", call=entry["call"], lane=entry["lane"])
                lane.save()
        except OSError:
            continue
        finally:
            lane.close()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def lane_key(node_id: str, iteration: int, attempt: int, agent: Mapping[str, str]) -> str:
    return "\x1f".join([node_id, str(iteration), str(attempt), agent.get("agent_id", "")])
