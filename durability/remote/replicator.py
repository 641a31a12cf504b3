"""The service's replicator: pushes every new checkpoint to the remotes of
its worktree, in the background (docs/how-to/remote.md).

A capture never waits for it: the outbox is a table of the store, written in
the capture's own transaction (``durability.store.outbox``), and the service only
pokes this thread after a batch is recorded.  The thread lets a burst
gather for a moment, then pushes everything pending of one worktree to one
remote in one ``git push`` (the pins, then the manifest that lists them),
and records them ``pushed`` once git has said so.  A failed push is retried
with a doubling delay; a checkpoint still unpushed ``bound_ms`` after it was
captured is filed once as a ``replication-failed`` gap and kept trying.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import filelock
import pygit2

from durability.backends.git_commit import key_ref
from durability.backends.modes import PREFIX as MODES_PREFIX
from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import write_gap
from durability.ground import proc
from durability.ground.errors import DurabilityError
from durability.ground.ids import printable
from durability.inspect.repository import open_checkpoints
from durability.remote import manifest, secrets, transport
from durability.remote.transport import RemoteFailed
from durability.store import Checkpoint, EngineError, Store, now_ms
from durability.store.remote_rows import FAILED, PUSHED, Pending, Remotes

__all__ = ["GAP_REASON", "WITHHELD_REASON", "Replicator", "pin_ref"]

log = logging.getLogger("durability.replicate")

GAP_REASON = "replication-failed"
#: A checkpoint not pushed because its push would carry a secret-shaped file.
WITHHELD_REASON = "secret-withheld"
#: A burst of captures is pushed once it pauses this long...
QUIET_S = 0.2
#: ...or this long after its first checkpoint, if it goes on.
MAX_DEFER_S = 2.0
#: The replicator's niceness (Linux: per thread, and inherited by the git it
#: starts), so that pushing never takes the CPU from a capture.
NICENESS = 10
#: How often the thread looks for work nobody poked it about (checkpoints
#: taken in-process while the service ran, retries that came due).  A look
#: reads the outbox only: its cost is what is left to push, not the history.
POLL_S = 2.0
BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 30.0
#: How long a stopping service waits for a push under way.
STOP_WAIT_S = 10.0
#: The most checkpoints one push carries (one git command line).
MAX_BATCH = 500
_JJ_PREFIX = "refs/durability/jj/"


def pin_ref(repo: pygit2.Repository, c: Checkpoint) -> str:
    """The ref that keeps ``c``'s commit: its own pin (jj), else the pin of
    its attempt, whose chain of parents holds it (git)."""
    own = _JJ_PREFIX + c.commit_id
    return own if own in repo.references else key_ref(c.key)


class Replicator:
    def __init__(self, settings: Settings, store: Callable[[], Store],
                 env: Mapping[str, str]) -> None:
        self.settings = settings
        self._store = store
        self._env = env
        #: One connection for the thread's life: its look every ``POLL_S``
        #: would otherwise open one (tens of ms under PostgreSQL).
        self._remotes = Remotes(settings.database, keep_open=True)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: (worktree, remote) -> (monotonic time of the next try, last delay)
        self._backoff: dict[tuple[str, str], tuple[float, float]] = {}
        self._errors: dict[tuple[str, str], str] = {}
        #: (worktree, remote) pairs whose remote manifest was compared since start.
        self._compared: set[tuple[str, str]] = set()
        #: This state store's id in the names of its manifests (``manifest.replica_id``).
        self._replica_id: str | None = None
        self._scanner = secrets.Scanner()
        #: The commits each local manifest lists (checked when they were added).
        self._listed: dict[str, set[str]] = {}
        #: (request id, remote) of the secret-withheld gaps filed since start.
        self._filed: set[tuple[str, str]] = set()
        #: git pushes that succeeded, and checkpoints they carried.
        self.pushes = 0
        self.pushed = 0
        #: Checkpoints of the outbox are being pushed to a remote now.
        self._pushing = False

    def _replica(self) -> str:
        if self._replica_id is None:
            self._replica_id = manifest.replica_id(self.settings.state_dir)
        return self._replica_id

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="replicate", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop now: a push under way is killed with its process group (a
        push hanging on the remote's hook would otherwise outlive the
        service); it is atomic, so nothing of it landed, and the next service
        pushes it again.  Waits up to ``STOP_WAIT_S`` for the thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            if self._thread.ident is not None:
                proc.kill_started_by(self._thread.ident)
            self._thread.join(STOP_WAIT_S)
            if self._thread.is_alive():
                return  # a push still under way holds the connection; the process ends it
        self._remotes.close()

    def poke(self) -> None:
        """New checkpoints are recorded: push them soon (never waits)."""
        self._wake.set()

    def busy(self) -> bool:
        """Whether checkpoints are being pushed now: an idle service must not
        leave meanwhile (its stop would kill the push).  What a failing
        remote keeps in the outbox for a later try does not count: the next
        service retries it."""
        return self._pushing

    def _loop(self) -> None:
        _lower_priority()
        self._repair()
        while not self._stop.is_set():
            if self._wake.wait(self._idle_s()):
                self._gather()
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.run_once()
            except Exception:  # the thread must outlive a bug; the outbox keeps the work
                log.exception("replication pass failed")

    def _repair(self) -> None:
        """Once per service: queue what an older toolkit recorded without
        outbox rows (the one look at the whole history; niced, and outside
        the store's write lock unless it finds something)."""
        try:
            if self._remotes.repair():
                log.info("queued checkpoints the replication outbox lacked")
                self._wake.set()
        except EngineError as exc:
            log.warning("cannot check the replication outbox: %s", exc)

    def _gather(self) -> None:
        """Wait out a burst: until no checkpoint came for ``QUIET_S``, at most
        ``MAX_DEFER_S``.  Pushing in the middle of one would compete with its
        captures for the CPU and the store, and push it piecemeal."""
        first = time.monotonic()
        self._wake.clear()
        while not self._stop.is_set() and time.monotonic() - first < MAX_DEFER_S:
            if not self._wake.wait(QUIET_S):
                return
            self._wake.clear()

    def _idle_s(self) -> float:
        if not self._backoff:
            return POLL_S
        soonest = min(at for at, _ in self._backoff.values())
        return min(POLL_S, max(soonest - time.monotonic(), 0.01))

    def run_once(self) -> int:
        """Push what is due; returns how many checkpoints were pushed.

        One pass at a time per state store: two services of one state
        folder (on other sockets) share one outbox, and must neither push
        the same checkpoints twice nor race for the local manifest ref."""
        lock = filelock.FileLock(str(self.settings.state_dir / "replicate.lock"), timeout=0,
                                 mode=0o600)  # private, as everything in the state folder
        try:
            lock.acquire()
        except filelock.Timeout:
            return 0  # the other service's replicator is at it
        except OSError as exc:
            log.warning("cannot take the replication lock: %s", exc)
            return 0
        try:
            return self._pass()
        finally:
            lock.release()

    def _pass(self) -> int:
        try:
            pending = self._remotes.pending()
        except EngineError as exc:
            log.warning("cannot read the replication outbox: %s", exc)
            return 0
        groups: dict[tuple[str, str], list[Pending]] = {}
        for item in pending:
            groups.setdefault((item.checkpoint.worktree, item.remote.name), []).append(item)
        done = 0
        for key, items in groups.items():
            done += self._replicate(key, items)
        for key in set(self._backoff) - set(groups):  # nothing left to retry there
            self._backoff.pop(key, None)
            self._errors.pop(key, None)
        return done

    def _replicate(self, key: tuple[str, str], items: list[Pending]) -> int:
        at, delay = self._backoff.get(key, (0.0, 0.0))
        sent: list[Pending] = []
        unpinned: list[Pending] = []
        withheld: list[Pending] = []
        if time.monotonic() >= at:
            self._pushing = True
            try:
                patterns = secrets.load(self._env)
                for start in range(0, len(items), MAX_BATCH):
                    done, lost, held = self._push(items[start:start + MAX_BATCH], patterns)
                    self._remotes.mark(done, PUSHED)
                    sent += done
                    unpinned += lost
                    withheld += held
                self._backoff.pop(key, None)
                self._errors.pop(key, None)
            except (DurabilityError, EngineError, pygit2.GitError, OSError) as exc:
                delay = min(max(delay * 2, BACKOFF_MIN_S), BACKOFF_MAX_S)
                self._backoff[key] = (time.monotonic() + delay, delay)
                self._errors[key] = str(exc)
                log.warning("replication of %s to %s failed (next try in %gs): %s",
                            key[0], key[1], delay, exc)
            finally:
                self._pushing = False
        # Only what is still not there: the batches before a refused one are.
        handled = {id(p) for p in sent + unpinned + withheld}
        self._file_overdue([p for p in items if id(p) not in handled],
                           self._errors.get(key, "not pushed yet"))
        if unpinned:
            self._file_overdue(unpinned, "its pin is missing here: it cannot be pushed")
        return len(sent)

    def _push(self, items: list[Pending], patterns: secrets.Patterns
              ) -> tuple[list[Pending], list[Pending], list[Pending]]:
        """Push ``items``: those now on the remote, those left out because
        their pin is gone (one lost pin must not hold back the rest), and
        those withheld because their push would carry a secret-shaped file."""
        worktree, remote = items[0].checkpoint.worktree, items[0].remote
        repo = open_checkpoints(Path(worktree), self._env)
        there = self._already_there(repo, items)
        if there:
            self._remotes.mark(there, PUSHED)
            items = [p for p in items if p not in there]
        pins = {id(p): pin_ref(repo, p.checkpoint) for p in items}
        # Each pin read once: a git attempt's pin moves on every capture, and
        # the replicator does not hold the worktree's lock.  What is scanned
        # below is this commit, and the push sends exactly it (``sha:ref``),
        # never wherever the ref points when git runs.
        tips = {ref: _target(repo, ref) for ref in set(pins.values())}
        lost = [p for p in items if tips[pins[id(p)]] is None]
        items = [p for p in items if tips[pins[id(p)]] is not None]
        mref = manifest.local_ref(worktree, remote.name, self._replica())
        items, held = self._withhold(repo, mref, items, pins, tips, patterns)
        if not items:
            return there, lost, held
        entries = [manifest.Entry(p.checkpoint, pins[id(p)]) for p in items]
        sent = {e.ref: t for e in entries if (t := tips[e.ref]) is not None}
        for p in items:
            mode = MODES_PREFIX + p.checkpoint.commit_id
            target = _target(repo, mode)
            if target is not None:
                sent[mode] = target
        manifest.add(repo, mref, entries)
        self._listed.setdefault(mref, set()).update(p.checkpoint.commit_id for p in items)
        sent[mref] = str(repo.references[mref].target)  # ours, written under our lock
        specs = [f"{sha}:{ref}" for ref, sha in sorted(sent.items())]
        transport.push(repo.path, remote.url, specs, env=self._env)
        self._verify(repo, remote.url, sent)
        self.pushes += 1
        self.pushed += len(items)
        return there + items, lost, held

    def _withhold(self, repo: pygit2.Repository, mref: str, items: list[Pending],
                  pins: dict[int, str], tips: Mapping[str, str | None],
                  patterns: secrets.Patterns) -> tuple[list[Pending], list[Pending]]:
        """Split ``items`` into those whose push carries no secret-shaped file
        and those it would (each filed once as a ``secret-withheld`` gap,
        recorded ``failed`` and kept in the outbox: pushed once the file is
        forgotten or allowed).

        What a push carries is the commit its pin named when read (``tips``;
        for git, the attempt's newest: its chain holds the earlier ones) and
        the history under it that was not listed as pushed before."""
        known = self._listed.get(mref)
        if known is None:  # read once per service: a manifest may list 100,000
            known = self._listed[mref] = {e.checkpoint.commit_id
                                          for e in manifest.read(repo, mref)}
        ok, held = [], []
        published = secrets.published_tips(repo)
        for p in items:
            tip = tips[pins[id(p)]]
            assert tip is not None
            found = self._scanner.scan(repo, tip, patterns, known, published)
            if not found:
                ok.append(p)
                continue
            held.append(p)
            filed = (p.checkpoint.request_id, p.remote.name)
            if filed not in self._filed:  # once per service (the store keeps one anyway)
                self._file_withheld(p, found)
                self._filed.add(filed)
        return ok, held

    def _file_withheld(self, p: Pending, found: tuple[secrets.Finding, ...]) -> None:
        c = p.checkpoint
        own = c.commit_id
        named = "; ".join(
            f"{printable(f.path)} (pattern {printable(f.pattern)}"
            + (f", in your git history: commit {f.commit[:12]} on {printable(f.own_ref)}"
               if f.own_ref else
               "" if f.commit == own else f", in its history: commit {f.commit[:12]}") + ")"
            for f in found)
        if all(f.own_ref for f in found):
            remedy = ("your own commits hold it, which `durability forget` does not rewrite: "
                      "allow the path under [secrets] allow in the config file")
        else:
            remedy = ("`durability forget` the path, or allow it under [secrets] allow in "
                      "the config file")
        detail = (f"seq {c.seq} ({c.commit_id[:12]}) not pushed to remote {p.remote.name}: "
                  f"it would carry {named}; {remedy} (docs/how-to/remote.md)")
        log.warning("withheld %s seq %s from %s: %s", c.run_id, c.seq, p.remote.name, named)
        write_gap(self.settings, spool.gap_record(
            run_id=c.run_id, request_id=f"{WITHHELD_REASON}-{p.remote.name}-{c.request_id}",
            reason=WITHHELD_REASON, node_id=c.node_id, iteration=c.iteration,
            attempt=c.attempt, worktree=c.worktree, source=c.source,
            tool_use_id=c.tool_use_id, detail=detail), self._store)
        try:  # `failed`, with why: its gap is filed, and it stays in the outbox
            self._remotes.mark([p], FAILED, detail[:500])
        except EngineError as exc:
            log.warning("cannot record a withheld checkpoint: %s", exc)

    def _verify(self, repo: pygit2.Repository, url: str, sent: Mapping[str, str]) -> None:
        """Believe a push only once the remote shows every ref it carried at
        the commit pushed (``git ls-remote``): a remote whose hook deletes or
        moves what it accepted said yes, and holds nothing.  Marked pushed,
        such checkpoints would be dropped here by gc (jj) while they exist
        nowhere else; not verified, they stay due and become gaps."""
        refs = sorted(sent)
        held = transport.ls_remote(repo.path, url, refs, env=self._env)
        wrong = [r for r in refs if held.get(r) != sent[r]]
        if wrong:
            raise RemoteFailed(
                f"the remote accepted the push but does not hold {len(wrong)} of its "
                f"{len(refs)} refs afterwards (e.g. {wrong[0]}): a hook there deletes or "
                "moves what it takes; nothing is recorded as pushed")

    def _already_there(self, repo: pygit2.Repository, items: list[Pending]) -> list[Pending]:
        """Items a push before a crash carried but did not get recorded.

        Once per worktree and remote in a service's life: when the remote's
        manifest is at the local manifest's tip, every checkpoint that
        manifest lists is there (pins and manifest go in one atomic push), so
        it is recorded, not pushed again.  A failed push leaves the local tip
        ahead of the remote's, and nothing is taken for pushed.
        """
        worktree, remote = items[0].checkpoint.worktree, items[0].remote
        if (worktree, remote.name) in self._compared:
            return []
        mref = manifest.local_ref(worktree, remote.name, self._replica())
        tip = repo.references.get(mref)
        if tip is None:
            self._compared.add((worktree, remote.name))
            return []
        on_remote = transport.ls_remote(repo.path, remote.url, [mref], env=self._env)
        self._compared.add((worktree, remote.name))
        if on_remote.get(mref) != str(tip.target):
            return []
        listed = {(e.checkpoint.request_id, e.checkpoint.commit_id)
                  for e in manifest.read(repo, mref)}
        return [p for p in items if (p.checkpoint.request_id, p.checkpoint.commit_id) in listed]

    def _file_overdue(self, items: list[Pending], error: str) -> None:
        """File one replication-failed gap per checkpoint past the bound."""
        now = now_ms()
        bound = self.settings.replication_bound_ms
        late = [p for p in items if p.state != FAILED and now - p.since_ms >= bound]
        for p in late:
            c = p.checkpoint
            write_gap(self.settings, spool.gap_record(
                run_id=c.run_id, request_id=f"{GAP_REASON}-{p.remote.name}-{c.request_id}",
                reason=GAP_REASON, node_id=c.node_id, iteration=c.iteration,
                attempt=c.attempt, worktree=c.worktree, source=c.source,
                tool_use_id=c.tool_use_id,
                detail=(f"seq {c.seq} ({c.commit_id[:12]}) not on remote {p.remote.name} "
                        f"after {bound / 1000:g}s: {error}")), self._store)
        if late:
            try:
                self._remotes.mark(late, FAILED, error[:500])
            except EngineError as exc:
                log.warning("cannot record failed replication: %s", exc)


def _target(repo: pygit2.Repository, ref: str) -> str | None:
    """The commit ``ref`` names now, or None (it is gone)."""
    found = repo.references.get(ref)
    return None if found is None else str(found.target)


def _lower_priority() -> None:
    """Make the calling thread (and what it starts) nicer, on Linux only:
    elsewhere the call would lower the whole service, captures included."""
    if sys.platform != "linux":
        return
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)
    except OSError:
        pass  # not allowed: replicate at the same priority
