"""The snapshot service: a Unix-socket server that captures worktrees.

Lifecycle: ``Service(settings)`` is a context manager; ``start()`` claims the
socket (a live service keeps it, a stale file is replaced), ``serve_forever()``
blocks until ``stop()``.  Threads: one accept loop, one per connection, one
per busy worktree (``Coalescer``), one that ingests the gap spool and one
that runs gc on its schedule (``gc_schedule``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Iterable
from concurrent.futures import CancelledError
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from durability.backends import capture_settings, resolve_worktree
from durability.capture.boundary import record_boundaries
from durability.capture.capturer import Capturer, CaptureRequest, Outcome, expired_outcome
from durability.capture.coalesce import Coalescer
from durability.config import Settings
from durability.gaps.ingest import SpoolCursor, ingest_spool
from durability.ground import client
from durability.ground.errors import (
    CaptureError,
    DurabilityError,
    InsecurePath,
    LockTimeout,
    ProtocolError,
    ServiceRunning,
)
from durability.ground.paths import ensure_private_dir
from durability.hook import autostart
from durability.remote.replicator import Replicator
from durability.service import gc_schedule, protocol, watch_ops
from durability.service.informed import InformedCaptures
from durability.service.owners import Owners, WatchOwners
from durability.service.record import ServiceLock, forget_state_record, write_state_record
from durability.store import AttemptKey, EngineError, Store
from durability.store.boundaries import CallInfo
from durability.store.database import file_inode
from durability.watch.manager import WatchManager
from durability.watch.tracked import Tracker

__all__ = ["VERSION", "Service"]

log = logging.getLogger("durability.service")
VERSION = "0.1.0"
# Bound on simultaneous connections (one thread each).  Beyond it a new
# connection is answered service-busy at once, so its client captures
# in-process instead of waiting in the backlog.
MAX_CONNECTIONS = 256
# Bound per client process (peer pid): one process holding many connections
# (a flood of slow clients) cannot take every slot from the others.  A hook
# uses one connection; the SDK and the watcher a few at most.
MAX_PER_PEER = 16
# A client has this long, in all, to send each request line: a connection
# trickling one byte every few seconds is closed once it runs out, so it
# cannot pin a thread (a per-recv timeout would restart with every byte).
# Clients send their line right after connecting.
READ_TIMEOUT_S = 2.0
# How often gaps spooled by other processes are pulled into the store.
INGEST_INTERVAL_S = 30.0
# The accept loop wakes this often to notice stop(), and to check that its
# socket and state folder are still there (one lstat and one stat each time).
_ACCEPT_POLL_S = 0.25
# A socket that cannot be bound again this many polls in a row (one minute:
# its folder cannot be made again, or its path is taken by something not
# ours to remove) makes the service leave: serving nobody, it would only
# hold its watches and memory; the next hook starts one where it can.
REBIND_LIMIT = 240


class Service:
    """``autostarted``: started by a hook (``hook.autostart``), so it leaves
    after ``settings.service_idle_ms`` with no request, no watch and no
    push under way.
    ``clock``: the monotonic clock that idle time is measured on (a seam)."""

    def __init__(self, settings: Settings, *, env: dict[str, str] | None = None,
                 autostarted: bool = False, clock: Any = time.monotonic) -> None:
        self.settings = settings
        self.env = dict(os.environ if env is None else env)
        self.autostarted = autostarted
        self._clock = clock
        self._last_request = clock()
        #: Why the service stopped by itself ("" while it runs, or when asked).
        self.left_because = ""
        self._squatted = ""
        self._rebind_failures = 0
        self._stop = threading.Event()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._threads: list[threading.Thread] = []
        self._conn_threads: set[threading.Thread] = set()
        self._conn_lock = threading.Lock()
        self._per_peer: dict[int, int] = {}
        self._listener: socket.socket | None = None
        self._lock: ServiceLock | None = None
        self._inode: int | None = None
        self.store: Store | None = None
        # The state file's inode when the store was opened (None under
        # PostgreSQL), and the lock under which the store is swapped.
        self._store_ino: int | None = None
        self._store_lock = threading.Lock()
        self.capturer: Capturer | None = None
        self.coalescer: Coalescer | None = None
        self.watcher: WatchManager | None = None
        #: Ends the watches of attempts whose owner is gone (``owners``).
        self.watch_owners: WatchOwners | None = None
        self.replicator: Replicator | None = None
        self.informed: InformedCaptures | None = None
        #: Where the last ingest stopped in each spool file.
        self.spool_cursor = SpoolCursor()
        self.requests = 0
        self.gc: gc_schedule.GcSchedule | None = None

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Service:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        path = self.settings.socket_path
        ensure_private_dir(path.parent)
        # Made here even when the store is elsewhere (PostgreSQL): it holds
        # the locks and the spool, and once it is gone the service leaves.
        ensure_private_dir(self.settings.state_dir)
        self._lock = ServiceLock(path)
        self._lock.acquire()
        try:
            self._claim_socket(path)
            # Found by status, stop and doctor even once the socket's folder
            # is gone for good (``record``).
            write_state_record(self.settings.state_dir, path)
            self.store = Store(self.settings.database)
            self._store_ino = self._state_file_ino()
            self.capturer = Capturer(settings=self.settings, store=self._get_store, env=self.env)
            tracker = Tracker(max_worktrees=self.settings.informed_worktrees,
                              max_watches=self.settings.informed_watches)
            self.informed = InformedCaptures(
                self.capturer, tracker, self._get_store,
                rescan_s=self.settings.informed_rescan_ms / 1000,
                settle_s=self.settings.informed_settle_ms / 1000)
            self.coalescer = Coalescer(
                self._run_batch, burst_quiet_s=self.settings.burst_quiet_ms / 1000,
                burst_max_s=self.settings.burst_max_ms / 1000,
                answerable=self.informed.answerable)
            self._ingest()
        except BaseException:
            self._release()
            raise
        self._spawn(self._accept_loop, "accept")
        self._spawn(self._ingest_loop, "ingest")
        # Pushes checkpoints to their worktrees' remotes; a capture only pokes it.
        self.replicator = Replicator(self.settings, self._get_store, self.env)
        self.replicator.start()
        self.gc = gc_schedule.GcSchedule(self.settings, self._get_store, self.env, self._stop)
        self._spawn(self.gc.loop, "gc")
        autostart.started(self.settings.state_dir, str(path))
        # After the accept loop: a ping is answered while watches resume.
        self.watch_owners = WatchOwners(Owners(self.settings.database), self._stop)
        self.watcher = watch_ops.start_manager(self.settings, self.coalescer, self._get_store,
                                               wrap=self.watch_owners.capture)
        self.watch_owners.manager = self.watcher
        self._spawn(self.watch_owners.loop, "owners")
        log.info("serving on %s (pid %d)", path, os.getpid())

    def warm(self, paths: Iterable[Path]) -> None:
        """Watch and scan each worktree of ``paths`` now, on a thread each
        (``InformedCaptures.warm``): an autostarting hook names the worktree
        it captured, whose next tool call then comes to a worktree already
        watched and scanned. A path that is not a worktree's root is left
        alone (logged): the next request for it captures as usual."""
        for path in paths:
            self._spawn(lambda p=path: self._warm_one(p), "warm")

    def _warm_one(self, path: Path) -> None:
        try:
            worktree = resolve_worktree(path, self.env)
        except DurabilityError as exc:
            log.info("not warming %s: %s", path, exc)
            return
        if worktree != Path(os.path.abspath(path)).resolve():
            log.info("not warming %s: not the root of its worktree (%s)", path, worktree)
            return
        assert self.informed is not None
        try:
            warmed = self.informed.warm(worktree)
        except Exception:  # only ever a head start: the next capture does it all
            log.exception("warming %s failed", worktree)
            return
        log.info("warmed %s" if warmed else "did not warm %s", worktree)

    def _claim_socket(self, path: Path) -> None:
        if path.exists() or path.is_symlink():
            if _answers(path):
                raise ServiceRunning(f"a service is already answering on {path}")
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise InsecurePath(f"{path} exists and is not a socket; not replacing it")
            path.unlink()  # stale: its service died without cleaning up
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is created 0600, never briefly wider
        try:
            listener.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        listener.listen(128)
        listener.settimeout(_ACCEPT_POLL_S)
        self._listener = listener
        self._inode = os.stat(path).st_ino

    def serve_forever(self) -> None:
        """Block until ``stop()`` is called (from a signal handler or a thread)."""
        self._stop.wait()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        """Stop accepting, answer what is queued, release the socket."""
        self._stop.set()
        if self.watch_owners is not None:
            self.watch_owners.wake.set()
        for thread in self._threads:
            thread.join(5)
        with self._conn_lock:
            conns = list(self._conn_threads)
        if self.watcher is not None:
            self.watcher.close(final=True)  # rows stay: a restarted service resumes them
        if self.coalescer is not None:
            self.coalescer.close()
        if self.informed is not None:
            self.informed.close()
            self.informed.tracker.close()
        for thread in conns:
            thread.join(5)
        if self.replicator is not None:
            self.replicator.stop()
        if self.watch_owners is not None:
            self.watch_owners.owners.close()
        self._release()

    def _release(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            path = self.settings.socket_path
            try:
                if os.stat(path).st_ino == self._inode:
                    path.unlink()
            except OSError:
                pass
        if self.store is not None:
            self.store.close()
        if self._lock is not None:
            if self._lock.is_locked:
                forget_state_record(self.settings.state_dir, self.settings.socket_path)
            self._lock.release()

    def _spawn(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _get_store(self) -> Store:
        with self._store_lock:
            assert self.store is not None
            if self._store_ino is not None and self._state_file_ino() != self._store_ino:
                self._reopen_store()
            return self.store

    def _state_file_ino(self) -> int | None:
        """The SQLite state file's inode now (``database.file_inode``)."""
        return file_inode(self.settings.database)

    def _reopen_store(self) -> None:
        """The state file was deleted or replaced since it was opened (a
        reset, a restore from a backup): a connection kept open on the old
        inode would record every later capture where nothing reads it.  Open
        the one at the path (created when none is there); if that fails the
        error reaches the capture, which becomes a gap, never a lost row."""
        fresh = Store(self.settings.database)
        log.warning("state database %s was deleted or replaced while the service ran; "
                    "recording into the one there now", self.settings.db_path)
        old, self.store = self.store, fresh
        self._store_ino = self._state_file_ino()
        if old is not None:
            old.close()

    # -- loops -------------------------------------------------------------

    def _accept_loop(self) -> None:
        checked = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - checked >= _ACCEPT_POLL_S:
                checked = time.monotonic()
                self.housekeep()
            listener = self._listener
            assert listener is not None
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            self._admit(conn)

    # -- its own socket, state folder and idle time ------------------------

    def housekeep(self) -> None:
        """Leave when the state folder is gone or (autostarted) after the
        idle time; bind the socket again when it was removed or replaced.
        Run by the accept loop, which alone swaps the listener."""
        if not os.path.isdir(self.settings.state_dir):
            return self._leave(f"its state folder {self.settings.state_dir} is gone")
        idle_s = self.settings.service_idle_ms / 1000
        if self.autostarted and idle_s and self._idle_for() >= idle_s:
            return self._leave(f"autostarted and idle for {idle_s:g}s with no watch: the "
                               "next hook starts a service again")
        self._check_socket()

    def _idle_for(self) -> float:
        """Seconds since the last request; 0 while anything is going on (a
        connection, a queued capture, a watch, a push under way)."""
        with self._conn_lock:
            busy = bool(self._conn_threads)
        if busy or (self.coalescer is not None and self.coalescer.queued()) \
                or (self.watcher is not None and self.watcher.list()) \
                or (self.replicator is not None and self.replicator.busy()):
            self._last_request = self._clock()
            return 0.0
        return float(self._clock() - self._last_request)

    def _leave(self, why: str) -> None:
        log.warning("stopping: %s", why)
        self.left_because = why
        self._stop.set()

    def _check_socket(self) -> None:
        path = self.settings.socket_path
        try:
            st = os.lstat(path)
            if st.st_ino == self._inode and stat.S_ISSOCK(st.st_mode):
                return
        except (FileNotFoundError, NotADirectoryError):
            pass  # gone, or its folder is (a file took the folder's name)
        except OSError:
            return  # cannot tell (a folder made unreadable): try again later
        try:
            ensure_private_dir(path.parent)
            if self._lock is not None and not self._lock.still_ours():
                # Its lock file went with the socket (a cleared folder): take
                # the one there now, or leave it to the service that holds it.
                fresh = ServiceLock(path)
                fresh.acquire()
                self._lock.release()
                self._lock = fresh
            old = self._listener
            self._claim_socket(path)
        except ServiceRunning as exc:
            return self._leave(f"another service took over {path} ({exc})")
        except (DurabilityError, OSError) as exc:
            self._rebind_failures += 1
            if self._rebind_failures >= REBIND_LIMIT:
                return self._leave(f"its socket {path} could not be bound again in "
                                   f"{REBIND_LIMIT * _ACCEPT_POLL_S:g}s: {exc}")
            if str(exc) != self._squatted:  # said once, tried again every poll
                self._squatted = str(exc)
                log.warning("socket %s was removed or replaced and cannot be bound again "
                            "(leaving after %gs of this): %s", path,
                            REBIND_LIMIT * _ACCEPT_POLL_S, exc)
            return
        self._squatted = ""
        self._rebind_failures = 0
        if old is not None:
            old.close()
        log.warning("socket %s was removed or replaced; bound it again", path)

    def _admit(self, conn: socket.socket) -> None:
        """Serve ``conn`` on its own thread, or refuse it at once (never wait:
        the accept loop must keep answering everyone else)."""
        pid = _peer_pid(conn)
        with self._conn_lock:
            crowded = pid is not None and self._per_peer.get(pid, 0) >= MAX_PER_PEER
            admitted = not crowded and self._slots.acquire(blocking=False)
            if admitted:
                if pid is not None:
                    self._per_peer[pid] = self._per_peer.get(pid, 0) + 1
                thread = threading.Thread(target=self._serve_conn, args=(conn, pid),
                                          daemon=True, name="conn")
                self._conn_threads.add(thread)
        if not admitted:
            return _refuse_busy(conn, "per-client" if crowded else "total")
        thread.start()

    def _ingest_loop(self) -> None:
        while not self._stop.wait(INGEST_INTERVAL_S):
            self._ingest()

    def _ingest(self) -> None:
        try:
            result = ingest_spool(self._get_store(), self.settings.spool_dirs,
                                  self.spool_cursor)
        except (EngineError, DurabilityError, OSError) as exc:
            log.warning("gap ingestion failed: %s", exc)
            return
        for reason in result.skipped:
            log.warning("spool folder skipped: %s", reason)
        if result.added or result.torn:
            log.info("ingested %d gaps (%d torn lines skipped)", result.added, result.torn)

    # -- one connection ----------------------------------------------------

    def _serve_conn(self, conn: socket.socket, pid: int | None) -> None:
        try:
            with conn:
                conn.settimeout(READ_TIMEOUT_S)
                if not _same_user(conn):
                    _send(conn, protocol.error_response(
                        "peer-refused", "connections from another user are refused"))
                    return
                self._serve_lines(conn)
        except OSError:
            pass  # the client went away; nothing was promised to it
        finally:
            with self._conn_lock:
                self._conn_threads.discard(threading.current_thread())
                if pid is not None:
                    left = self._per_peer.pop(pid, 1) - 1
                    if left:
                        self._per_peer[pid] = left
            self._slots.release()

    def _serve_lines(self, conn: socket.socket) -> None:
        buf = b""
        while not self._stop.is_set():
            # Each line within READ_TIMEOUT_S in all; past it, recv raises
            # TimeoutError (an OSError) and the connection is closed.
            line_deadline = time.monotonic() + READ_TIMEOUT_S
            while b"\n" not in buf and len(buf) <= protocol.MAX_REQUEST_BYTES:
                conn.settimeout(max(line_deadline - time.monotonic(), 0.001))
                chunk = conn.recv(65536)
                if not chunk:
                    return
                buf += chunk
            line, _, buf = buf.partition(b"\n")
            if len(line) > protocol.MAX_REQUEST_BYTES:
                _send(conn, protocol.error_response(
                    "request-too-large", f"request exceeds {protocol.MAX_REQUEST_BYTES} bytes"))
                return
            _send(conn, self.handle(line))

    def handle(self, line: bytes) -> dict[str, Any]:
        """Answer one request line."""
        self.requests += 1
        self._last_request = self._clock()
        try:
            req = protocol.parse_request(line)
        except ProtocolError as exc:
            return protocol.error_response(exc.code, exc.message)
        if isinstance(req, protocol.PingReq):
            assert self.coalescer is not None
            return {"v": 1, "ok": True, "pid": os.getpid(), "version": VERSION,
                    "captures": self.coalescer.captures, "queued": self.coalescer.queued(),
                    "requests": self.requests, "expired": self.coalescer.expired,
                    "pushes": self.replicator.pushes if self.replicator else 0,
                    "pushed": self.replicator.pushed if self.replicator else 0,
                    "informed": self.informed.stats() if self.informed else None,
                    "capture": capture_settings(self.env, self.settings.max_new_file_size)}
        if isinstance(req, protocol.WatchReq | protocol.UnwatchReq | protocol.WatchesReq):
            if self.watcher is None:
                return protocol.error_response("service-unreachable", "the service is starting")
            return watch_ops.answer(self.watcher, req)
        if req.watch is not None and self.watcher is not None:
            return watch_ops.around_capture(self.watcher, req, lambda: self._answer(req))
        return self._answer(req)

    def _answer(self, req: protocol.CaptureReq) -> dict[str, Any]:
        try:
            return protocol.outcome_response(self._capture(req))
        except Exception as exc:  # a bug must still be answered, and be on record
            log.exception("capture of %s failed unexpectedly", req.worktree)
            return protocol.outcome_response(self._internal_error(req, exc))

    def _internal_error(self, req: protocol.CaptureReq, exc: Exception) -> Outcome:
        assert self.capturer is not None
        error = DurabilityError(f"{type(exc).__name__}: {exc}", code="internal-error")
        return self.capturer.fail(_request(req), error)

    def _capture(self, req: protocol.CaptureReq) -> Outcome:
        assert self.capturer is not None and self.coalescer is not None
        request = _request(req)
        try:
            request = dataclasses.replace(request, worktree=resolve_worktree(req.worktree))
        except CaptureError as exc:
            return self.capturer.fail(request, exc)
        if request.expired():  # read only now, from a backlog the service was slow to drain
            self.coalescer.expired += 1
            return expired_outcome(request)
        try:
            future = self.coalescer.submit(request)
        except RuntimeError as exc:
            return Outcome(req.request_id, error_code="service-unreachable",
                           error_message=str(exc))
        try:
            return future.result(timeout=_wait_s(req))
        except FutureTimeout:
            if future.cancel():
                # Never started.  Past its deadline its requester records it;
                # otherwise nobody will, so it is a gap now.
                if request.expired():
                    return expired_outcome(request)
                err = LockTimeout(f"not captured within {req.timeout_ms} ms")
                return self.capturer.fail(request, err)
            # Already capturing: its own result is the truth; wait for it.
            return future.result()
        except CancelledError:
            return Outcome(req.request_id, error_code="timeout", error_message="cancelled")

    def _run_batch(self, requests: list[CaptureRequest]) -> list[Outcome]:
        assert self.informed is not None
        lock_timeout = self.settings.jj_timeout_s + 30
        outcomes = self.informed.run_batch(requests, lock_timeout_s=lock_timeout)
        record_boundaries(self._get_store, requests, outcomes)  # issue 24: every call
        if self.replicator is not None and any(o.ok and not o.deduped for o in outcomes):
            self.replicator.poke()
        return outcomes


def _request(req: protocol.CaptureReq) -> CaptureRequest:
    """The capture a wire request asks for, on the worktree path as given."""
    return CaptureRequest(
        key=AttemptKey(req.run_id, req.node_id, req.iteration, req.attempt),
        worktree=Path(req.worktree), source=req.source, request_id=req.request_id,
        tool_use_id=req.tool_use_id, label=req.label, not_after_ms=req.deadline_ms,
        harness=req.harness, agent_id=req.agent_id, agent_type=req.agent_type,
        call=_call(req), session_id=req.session_id)


def _call(req: protocol.CaptureReq) -> CallInfo | None:
    """The tool call a hook's request reports (its boundary), else None."""
    if req.event is None:
        return None
    return CallInfo(tool_name=req.tool_name, event=req.event,
                    transcript_path=req.transcript_path, transcript_bytes=req.transcript_bytes)


def _wait_s(req: protocol.CaptureReq) -> float:
    """How long to wait for a capture to begin: ``timeout_ms``, and never
    past the request's deadline (a little after, so a capture that began in
    time is still waited for by ``future.result()``)."""
    wait = req.timeout_ms / 1000
    if req.deadline_ms is not None:
        wait = min(wait, max(req.deadline_ms / 1000 - time.time(), 0) + 0.05)
    return wait


def _peer_pid(conn: socket.socket) -> int | None:
    """The client's pid (Linux SO_PEERCRED); None where the platform cannot tell."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    try:
        pid, _uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, opt, 12))
    except OSError:
        return None
    return int(pid)


def _refuse_busy(conn: socket.socket, which: str) -> None:
    """Answer service-busy and close: the client captures in-process at once."""
    with conn:
        try:
            conn.settimeout(0.05)  # a fresh socket's buffer takes one line; never wait
            _send(conn, protocol.error_response(
                "service-busy", f"the service's {which} connection limit is reached"))
        except OSError:
            pass
    log.warning("refused a connection: %s connection limit reached", which)


def _answers(path: Path) -> bool:
    """Whether something is listening on the socket file ``path``."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISSOCK(st.st_mode):
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _same_user(conn: socket.socket) -> bool:
    """Peer credentials: only the service's own user may talk to it."""
    uid = client.peer_uid(conn)
    return uid is None or uid == os.getuid()


def _send(conn: socket.socket, response: dict[str, Any]) -> None:
    conn.sendall(json.dumps(response, separators=(",", ":")).encode() + b"\n")
