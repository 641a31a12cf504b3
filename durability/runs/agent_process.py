"""Running one agent CLI: its own process group, a parent-death watchdog,
stdout line by line, stderr's head and stdout's tail kept with caps.

The parent-death watchdog (decision record 0045) is a tiny Python process
of its own session that holds the read end of a pipe only this engine
process can write.  When the engine ends in any way (``kill -9`` included)
the kernel closes the write end, the watchdog reads end-of-file and kills
the agent's process group (TERM, then KILL after a grace).  A normal end
writes ``done``: the watchdog then kills at once what is left.  Agents run
tools in sessions of their own (Claude Code's Bash tool does), out of the
agent's group, so the watchdog also keeps, once a second (from ``/proc``),
the agent's descendants with their start times (every 0.5 s), and kills
those still alive at the end (a process that daemonised itself between two
looks, or a system without ``/proc``, escapes: only the group is sure).

Why not ``prctl(PR_SET_PDEATHSIG)``: it needs ``preexec_fn`` (unsafe with
threads, and tasks run in threads), it fires when the *thread* that forked
ends (a worker thread of the task pool), and it is Linux only.

Liveness is the process's exit (``Popen.wait``), never its pipes closing:
a grandchild (an MCP server) may hold stdout open long after the agent
ended.  Once the agent has exited, the rest of stdout is read for at most
``drain_s``, and whatever is left of the group is killed.
"""

from __future__ import annotations

import collections
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

__all__ = ["WATCHDOG_SOURCE", "AgentProcess"]

#: The watchdog's whole program (run as ``python -I -S -c``: no site, no
#: user paths; it imports only the standard library's os, signal, sys, time).
WATCHDOG_SOURCE = r"""
import os, select, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
root, grace = int(sys.argv[1]), float(sys.argv[2])
known = {}

def table():
    found = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if name.isdigit():
            try:
                with open("/proc/" + name + "/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            found[int(name)] = (int(fields[1]), fields[19])
    return found

def scan():
    procs = table()
    if root in procs:
        known.setdefault(root, procs[root][1])
    tree = {p for p, st in known.items() if procs.get(p, (0, None))[1] == st}
    grown = True
    while grown:
        grown = False
        for pid, (ppid, _) in procs.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grown = True
    for pid in tree:
        if pid in procs:
            known.setdefault(pid, procs[pid][1])

def kill(sig):
    procs = table()
    try:
        os.killpg(root, sig)
    except (ProcessLookupError, PermissionError):
        pass
    alive = False
    for pid, st in known.items():
        if procs.get(pid, (0, None))[1] == st:
            alive = True
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
    return alive

scan()
data = b""
while True:
    try:
        ready = select.select([0], [], [], 0.5)[0]
    except InterruptedError:
        continue
    if not ready:
        scan()
        continue
    chunk = os.read(0, 64)
    if not chunk:
        break
    data += chunk
scan()
if data.startswith(b"done"):
    kill(signal.SIGKILL)
    sys.exit(0)
if kill(signal.SIGTERM):
    end = time.monotonic() + grace
    while time.monotonic() < end:
        time.sleep(0.05)
        try:
            os.killpg(root, 0)
            continue
        except (ProcessLookupError, PermissionError):
            pass
        procs = table()
        if not any(procs.get(p, (0, None))[1] == st for p, st in known.items()):
            break
kill(signal.SIGKILL)
"""

#: Longest stdout line handed to the adapter; a longer one is cut there.
MAX_LINE = 8 * 1024 * 1024
#: Bytes of stderr kept (its head: where a CLI says why it would not start).
STDERR_HEAD = 16 * 1024
#: Lines of stdout kept for the attempt's log, each cut to this many characters.
TAIL_LINES = 40
TAIL_LINE_CHARS = 2000


class AgentProcess:
    """One running agent CLI (started by the constructor)."""

    def __init__(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str],
                 stdin: bytes | None = None, grace_s: float = 2.0,
                 drain_s: float = 2.0) -> None:
        self.drain_s = drain_s
        self.proc = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True)  # its own group: killed whole, by us or the watchdog
        self.pgid = self.proc.pid
        # Started at once after the agent (the window is the time between
        # two lines of Python); its stdin's write end lives only here
        # (close_fds: no other child inherits it).
        self.watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", WATCHDOG_SOURCE, str(self.pgid), str(grace_s)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr = bytearray()
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.killed: str | None = None
        self._closed = False
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        if stdin is not None:
            self._threads.append(threading.Thread(target=self._write_stdin, args=(stdin,),
                                                  daemon=True))
        for thread in self._threads:
            thread.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    # -- the pipes ------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                raw = self.proc.stdout.readline(MAX_LINE)
                if not raw:
                    break
                if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
                    while True:  # drop the rest of an oversized line
                        more = self.proc.stdout.readline(MAX_LINE)
                        if not more or more.endswith(b"\n"):
                            break
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                self.tail.append(line[:TAIL_LINE_CHARS])
                self._lines.put(line)
        except (OSError, ValueError):
            pass
        finally:
            self._lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            while True:
                chunk = os.read(self.proc.stderr.fileno(), 65536)
                if not chunk:
                    break
                room = STDERR_HEAD - len(self._stderr)
                if room > 0:
                    self._stderr += chunk[:room]
        except (OSError, ValueError):
            pass

    def _write_stdin(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass

    @property
    def stderr_head(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    # -- the stream -----------------------------------------------------------

    def lines(self, poll_s: float = 0.05) -> Iterator[str | None]:
        """Each stdout line as it arrives, and None every ``poll_s`` without
        one (so the caller can check a stop request); ends once the process
        has exited and its stdout is drained (or ``drain_s`` passed)."""
        exited_at: float | None = None
        while True:
            try:
                line = self._lines.get(timeout=poll_s)
            except queue.Empty:
                line = None
                if exited_at is None and self.proc.poll() is not None:
                    exited_at = time.monotonic()
                if exited_at is not None and time.monotonic() - exited_at > self.drain_s:
                    return  # a grandchild holds the pipe: the agent is over
                yield None
                continue
            if line is None:  # end of stdout
                self.proc.wait()
                return
            yield line

    def kill(self, why: str) -> None:
        """Kill the agent's whole group now (budget, quota, stop), and its
        descendants that run in sessions of their own."""
        if self.killed is None:
            self.killed = why
        tree = descendants(self.pgid)
        _killpg(self.pgid)
        _kill_listed(tree)

    def close(self) -> int:
        """Wait for the agent, kill what is left of its group, release the
        watchdog; the agent's exit status (negative: the signal)."""
        if self._closed:
            return self.proc.returncode
        self._closed = True
        try:
            code = self.proc.wait(timeout=30 if self.killed is None else 10)
        except subprocess.TimeoutExpired:
            _killpg(self.pgid)
            code = self.proc.wait()
        # (no descendant sweep here: the agent is reaped, its pid may be
        # another process's now; the watchdog sweeps what it has seen)
        _killpg(self.pgid)  # grandchildren left in the group
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        assert self.watchdog.stdin is not None
        try:
            self.watchdog.stdin.write(b"done")
            self.watchdog.stdin.close()
        except OSError:
            pass
        try:
            self.watchdog.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.watchdog.kill()
            self.watchdog.wait()
        for thread in self._threads:  # their pipes closed with the last holder
            thread.join(timeout=5)
        return code


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _table() -> dict[int, tuple[int, bytes]]:
    """pid -> (parent pid, start time) of every process, from ``/proc``
    (empty where there is none)."""
    found: dict[int, tuple[int, bytes]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except (OSError, IndexError):
                continue
            found[int(name)] = (int(fields[1]), fields[19])
    return found


def descendants(root: int) -> dict[int, bytes]:
    """Every descendant of ``root`` (and ``root``), with its start time."""
    procs = _table()
    tree = {root}
    grown = True
    while grown:
        grown = False
        for pid, (ppid, _) in procs.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grown = True
    return {pid: procs[pid][1] for pid in tree if pid in procs}


def _kill_listed(tree: dict[int, bytes]) -> None:
    """SIGKILL each process of ``tree`` still the one listed (same start time)."""
    if not tree:
        return
    procs = _table()
    for pid, started in tree.items():
        if procs.get(pid, (0, b""))[1] == started:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
