"""Building blocks for ``bench/bench_capture.py``: synthetic repositories,
timed subprocesses, percentiles, and a private snapshot service.

Not a test and not part of the package.  Every program runs from an argument
list (never a shell) with a private environment: the bench never touches the
user's own durability state, jj configuration or git index.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Bench", "Samples", "StubService", "find_tool", "timed", "timed_cpu"]

# A generous ceiling per command: the first snapshot of 100,000 files on a
# slow disk takes tens of seconds.
COMMAND_TIMEOUT_S = 600.0
#: The machine id of every bench's services and of this process's stores.
BENCH_HOST = "bench-host"
FILES_PER_DIR = 100


def find_tool(name: str) -> str:
    """``name`` on PATH, else beside the running Python (the project venv)."""
    found = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not os.access(found, os.X_OK):
        sys.exit(f"bench: {name} not found; run `make bench` (it installs it into .venv/bin)")
    return found


@dataclass
class Samples:
    """Wall times of one measurement, in milliseconds."""

    name: str
    ms: list[float] = field(default_factory=list)
    #: CPU time (user + system) of the timed process, when known: unlike wall
    #: time it barely moves when other work shares the machine.
    cpu_ms: list[float] = field(default_factory=list)

    def add(self, seconds: float, cpu_seconds: float | None = None) -> None:
        self.ms.append(seconds * 1000)
        if cpu_seconds is not None:
            self.cpu_ms.append(cpu_seconds * 1000)

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_ms) if self.cpu_ms else math.nan

    @property
    def median(self) -> float:
        return statistics.median(self.ms) if self.ms else math.nan

    @property
    def p90(self) -> float:
        """Nearest-rank 90th percentile (with few samples, close to the max)."""
        if not self.ms:
            return math.nan
        ordered = sorted(self.ms)
        return ordered[max(math.ceil(0.9 * len(ordered)) - 1, 0)]

    def cell(self) -> str:
        return f"{self.median:7.1f} / {self.p90:7.1f}"

    def to_json(self) -> dict[str, Any]:
        out = {"median_ms": round(self.median, 2), "p90_ms": round(self.p90, 2),
               "samples_ms": [round(x, 2) for x in self.ms]}
        if self.cpu_ms:
            out["cpu_median_ms"] = round(self.cpu_median, 2)
        return out


def timed(argv: Sequence[str], *, env: Mapping[str, str], cwd: Path | None = None,
          stdin: bytes | None = None) -> tuple[float, subprocess.CompletedProcess[bytes]]:
    """Run ``argv`` to completion; (seconds from spawn to exit, result).  A
    non-zero exit stops the bench: a failed command has no meaningful time."""
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=dict(env), cwd=cwd,
                          timeout=COMMAND_TIMEOUT_S, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"bench: {' '.join(argv)} exited {done.returncode}: "
                 f"{done.stderr.decode(errors='replace').strip()[:500]}")
    return elapsed, done


def timed_cpu(argv: Sequence[str], *, env: Mapping[str, str],
              stdin: bytes | None = None) -> tuple[float, float]:
    """As ``timed``: (wall seconds, CPU seconds of the process and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, _ = timed(argv, env=env, stdin=stdin)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


class Bench:
    """A scratch folder with private durability state, a jj config and a service."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.jj = find_tool("jj")
        self.git = find_tool("git")
        self.durability = find_tool("durability")
        self.service_pid: int | None = None
        self._edits = 0
        config = root / "jj-config.toml"
        config.write_text('[user]\nname = "Bench"\nemail = "bench@example.invalid"\n')
        # PYTHONDONTWRITEBYTECODE (set in some CI images) would make every hook
        # recompile the package from source: not what an installed toolkit pays.
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("DURABILITY_", "JJ_")) and k != "PYTHONDONTWRITEBYTECODE"}
        self.env: dict[str, str] = {
            **base,
            "DURABILITY_HOME": str(root / "state"),
            "DURABILITY_SOCKET": str(root / "run" / "service.sock"),
            "DURABILITY_SPOOL_DIR": str(root / "spool"),
            # One machine id for the services and hooks it starts and for the
            # stores this process opens to read their rows back (a store's
            # reads are per host; without it this process would make its own).
            "DURABILITY_HOST_ID": BENCH_HOST,
            "JJ_CONFIG": str(config),
            # git must not pick up the user's global config or hooks either.
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        # The stores this process opens (Store's default host) read as that machine.
        os.environ["DURABILITY_HOST_ID"] = BENCH_HOST

    # -- repositories ----------------------------------------------------------

    def build_repo(self, n_files: int) -> tuple[Path, float]:
        """A colocated jj repo of ``n_files`` small files, snapshotted once;
        returns it and the seconds the first (full) snapshot took."""
        repo = self.root / f"repo-{n_files}"
        for i in range(n_files):
            path = self.file_of(repo, i)
            if i % FILES_PER_DIR == 0:
                path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"file {i}\n" * 4)
        timed([self.jj, "git", "init", "--colocate", str(repo)], env=self.env)
        seconds, _ = timed(self.jj_argv(repo, "util", "snapshot"), env=self.env, cwd=repo)
        return repo, seconds

    def file_of(self, repo: Path, index: int) -> Path:
        """File ``index``: 100 files a folder, 100 folders a parent."""
        top, mid = index // (FILES_PER_DIR * 100), (index // FILES_PER_DIR) % 100
        return repo / f"d{top:03d}" / f"d{mid:02d}" / f"f{index:06d}.txt"

    def edit_one(self, repo: Path, n_files: int) -> Path:
        """Change one existing file (a different one, with new content, each time)."""
        self._edits += 1
        path = self.file_of(repo, (self._edits * 7919) % n_files)
        with path.open("a", encoding="utf-8") as f:
            f.write(f"edit {self._edits}\n")
        return path

    def jj_argv(self, repo: Path, *args: str) -> list[str]:
        """jj with the flags the toolkit's backend uses."""
        return [self.jj, "--no-pager", "--color=never", "-R", str(repo), *args]

    def git_env(self, n_files: int) -> dict[str, str]:
        """A private index, so the baseline never disturbs the repo's own."""
        return {**self.env, "GIT_INDEX_FILE": str(self.root / f"git-index-{n_files}")}

    # -- the service -----------------------------------------------------------

    def start_service(self) -> int:
        _, done = timed([self.durability, "serve", "--detach", "--json"], env=self.env)
        self.service_pid = int(json.loads(done.stdout)["pid"])
        return self.service_pid

    def ping(self) -> dict[str, Any]:
        from durability.ground import client

        answer = client.call(Path(self.env["DURABILITY_SOCKET"]), {"v": 1, "op": "ping"},
                             timeout_s=30)
        if not answer.get("ok"):
            sys.exit(f"bench: the service answered a ping with {answer}")
        return answer

    def captures(self) -> int:
        """Captures the service ran the backend for: its batches, less those it
        answered without one (from the last capture, or from a snapshot it took
        ahead once the tree settled), plus those ahead-of-time snapshots."""
        answer = self.ping()
        informed = answer.get("informed")
        if not informed:
            return int(answer["captures"])
        return int(informed["full"]) + int(informed["informed"]) + int(informed["ahead"])

    def stop_service(self) -> None:
        pid, self.service_pid = self.service_pid, None
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + 30
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (an unreaped zombie counts as gone: the detached
    service is not our child)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


class StubService:
    """A socket that answers every capture at once without capturing: a hook
    timed against it shows the hook's own fixed cost (interpreter, imports,
    payload, socket), apart from jj and the service."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        self._sock.listen(64)
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> StubService:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sock.close()
        self.path.unlink(missing_ok=True)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                request_id = json.loads(data or b"{}").get("request_id")
                conn.sendall(json.dumps({"v": 1, "ok": True, "request_id": request_id,
                                         "seq": 1, "commit_id": "0" * 40,
                                         "deduped": False}).encode() + b"\n")
