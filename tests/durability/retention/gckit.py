"""Builders shared by the retention tests: captures at chosen times on real
jj and git repositories, through the real capturer and store."""

from __future__ import annotations

from pathlib import Path

import pygit2

from durability.capture.capturer import Capturer, CaptureRequest, Outcome
from durability.config import Settings
from durability.store import AttemptKey, Store
from durability.store.clock import ManualClock, system_clock
from tests.helpers import make_git_repo, make_jj_repo

HOUR = 3_600_000
# Rows start at the real time (on an hour): jj stamps its operations with the
# wall clock, and gc's op-log cutoff compares them with the injected "now".
T0 = system_clock() // HOUR * HOUR
DAY = 24 * HOUR
KEY = AttemptKey("sess-gc", "session", 0, 1)


def make_repo(kind: str, path: Path) -> Path:
    if kind == "git":
        return make_git_repo(path)
    repo = make_jj_repo(path)
    (repo / "README.md").write_text("hello\n")
    return repo


class Recorder:
    """Captures of one worktree at times a ManualClock gives, remembering
    which content each seq holds."""

    def __init__(self, settings: Settings, worktree: Path, *, start_ms: int = T0) -> None:
        self.clock = ManualClock(start_ms)
        self.store = Store(settings.database, clock=self.clock)
        self.capturer = Capturer(settings=settings, store=lambda: self.store)
        self.worktree = worktree
        self.content: dict[tuple[AttemptKey, int], bytes] = {}
        self._n = 0

    def capture(self, text: bytes | None = None, *, key: AttemptKey = KEY,
                source: str = "hook", lock_timeout_s: float = 120) -> Outcome:
        self._n += 1
        data = text if text is not None else f"state {self._n}\n".encode() * 50
        (self.worktree / "work.txt").write_bytes(data)
        out = self.capturer.capture([CaptureRequest(
            key=key, worktree=self.worktree, source=source,
            request_id=f"req-{key.run_id}-{self._n}-{source}")], lock_timeout_s=lock_timeout_s)[0]
        assert out.ok, out
        self.content[(key, int(out.seq or 0))] = data
        return out

    def close(self) -> None:
        self.store.close()


def daily(settings: Settings, worktree: Path, days: int) -> Recorder:
    """A recorder that captured ``worktree`` once a day for ``days`` days."""
    rec = Recorder(settings, worktree)
    for _ in range(days):
        rec.capture()
        rec.clock.advance(DAY)
    return rec


def store_git(worktree: Path) -> pygit2.Repository:
    """The git store holding a worktree's checkpoints (jj's, or the repo's private one)."""
    if (worktree / ".jj").is_dir():
        from durability.backends.jj import git_dir

        return pygit2.Repository(str(git_dir(worktree)))
    from durability.backends.git import GitBackend

    return GitBackend.checkpoint_repository(worktree)  # the private store (decision 0049)


def file_at(worktree: Path, commit_id: str, name: str = "work.txt") -> bytes:
    repo = store_git(worktree)
    commit = repo[commit_id].peel(pygit2.Commit)
    return bytes(repo[commit.tree[name].id].data)


def has_object(worktree: Path, oid: str) -> bool:
    try:
        store_git(worktree)[oid]
    except KeyError:
        return False
    return True


def blob_of(data: bytes) -> str:
    return str(pygit2.hash(data))
