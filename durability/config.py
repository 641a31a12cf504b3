"""Settings, resolved once at the entry point and passed in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from durability.ground import envms, paths
from durability.ground.errors import InvalidInput

__all__ = ["DEFAULT_MAX_NEW_FILE_SIZE", "ENVIRONMENT_VARIABLES", "Settings", "database_location"]

#: Every ``DURABILITY_*`` variable the toolkit reads, and what it means: the
#: one list (docs/reference/environment.md is generated from it; the tests check
#: it).  ``Settings`` resolves the process-wide ones; the hook's fast path and
#: the plugin launcher read a few by the same names without importing this
#: module (``envms`` holds the ``_MS`` defaults and their validation, shared
#: with ``Settings``).
ENVIRONMENT_VARIABLES: dict[str, str] = {
    "DURABILITY_HOME": "state folder: state.db, locks, service log, default spool",
    "DURABILITY_DATABASE_URL": "the state store in PostgreSQL (postgresql://...) instead of "
                               "state.db",
    "DURABILITY_HOST_ID": "this machine's id in run ownership and worktree keys "
                          "(default: a random id kept in the state folder's host-id)",
    "DURABILITY_SOCKET": "the service socket",
    "DURABILITY_SPOOL_DIR": "the gap spool folder",
    "DURABILITY_JJ": "the jj binary",
    "DURABILITY_BACKEND": "force jj or git",
    "DURABILITY_JJ_TIMEOUT_MS": "ceiling on one jj command",
    "DURABILITY_HOOK_TIMEOUT_MS": "the hook's whole budget",
    "DURABILITY_BURST_QUIET_MS": "quiet a burst waits for before its capture",
    "DURABILITY_BURST_MAX_MS": "longest a burst waits",
    "DURABILITY_SERVICE_CONNECT_MS": "the hook's connect wait before capturing in-process",
    "DURABILITY_SERVICE_ANSWER_MS": "the hook's answer wait before capturing in-process",
    "DURABILITY_MAX_NEW_FILE_SIZE": "jj's snapshot.max-new-file-size for our captures",
    "DURABILITY_AUTOSTART": "whether a hook that finds no service starts one",
    "DURABILITY_RUN_ID": "the run a hook or wrapper records under",
    "DURABILITY_NODE_ID": "the node (task) a hook records under",
    "DURABILITY_ITERATION": "the iteration a hook records under",
    "DURABILITY_ATTEMPT": "the attempt a hook records under",
    "DURABILITY_WORKTREE": "the worktree a hook captures",
    "DURABILITY_REPLICATION_BOUND_MS": "a checkpoint not on its remote after this long is a "
                                       "replication-failed gap",
    "DURABILITY_CONFIG": "the config file (retention policy; docs/how-to/retention.md)",
    "DURABILITY_GC_INTERVAL_MS": "how often the service runs gc (0: never)",
    "DURABILITY_INFORMED_WORKTREES": "worktrees the service watches to inform hook captures "
                                     "(0: none)",
    "DURABILITY_INFORMED_WATCHES": "inotify watches (folders) those internal watches may use",
    "DURABILITY_INFORMED_RESCAN_MS": "the longest a watched worktree goes without a full "
                                     "capture (0: never)",
    "DURABILITY_INFORMED_SETTLE_MS": "how long a watched jj worktree stays still before the "
                                     "service snapshots it ahead of the hook (0: never)",
    "DURABILITY_SERVICE_IDLE_MS": "an autostarted service leaves after this long with no "
                                  "request and no watch (0: never)",
}

#: jj's ceiling on a new file it snapshots (jj's own default is 1 MiB).  64 MiB
#: keeps the source, assets, lock files and small binaries an agent writes,
#: and still keeps a stray dataset or build output out of every checkpoint
#: (on a 2-core box jj took 1.5 s and 216 MB of memory to snapshot a new
#: 64 MiB file).  A larger new file is left out and filed as a gap.
DEFAULT_MAX_NEW_FILE_SIZE = 64 * 1024 * 1024
#: Worktrees the service watches internally (``durability.watch.tracked``).
DEFAULT_INFORMED_WORKTREES = 32
@dataclass(frozen=True)
class Settings:
    state_dir: Path
    socket_path: Path
    spool_dir: Path
    #: Ceiling on one jj command; a capture that takes longer is a jj-timeout gap.
    jj_timeout_s: float = 120.0
    #: The hook's whole budget, from process start to exit.
    hook_timeout_ms: int = 10_000
    #: In a burst of requests, the next capture waits for this much quiet...
    burst_quiet_ms: int = 60
    #: ...but never longer than this (see ``durability.capture.coalesce``).
    burst_max_ms: int = 400
    #: The hook gives up connecting to the service after this long (a stopped
    #: or flooded service's full backlog) and captures in-process.
    service_connect_ms: int = 200
    #: The hook gives up waiting for the service's answer after this long (at
    #: most half of what is left of its budget) and captures in-process.
    service_answer_ms: int = 3_000
    #: jj's ``snapshot.max-new-file-size`` for our captures, in bytes.
    max_new_file_size: int = DEFAULT_MAX_NEW_FILE_SIZE
    #: A checkpoint not on a remote this long after its capture is a
    #: replication-failed gap (``durability.remote.replicator``).
    replication_bound_ms: int = 300_000
    #: The state store in PostgreSQL (``postgresql://...``); None: SQLite at
    #: ``db_path``.
    database_url: str | None = None
    #: Worktrees the service keeps an internal watch on (least recently
    #: captured dropped first; 0: none, every hook capture scans fully).
    informed_worktrees: int = DEFAULT_INFORMED_WORKTREES
    #: inotify watches (one per folder) those internal watches may use in
    #: all; None: a quarter of the user's limit (``watch.tracked``).
    informed_watches: int | None = None
    #: The longest a watched worktree goes without a full capture (0: never).
    informed_rescan_ms: int = 60_000
    #: How long a watched jj worktree stays still before the service
    #: snapshots it ahead of the hook (0: never; ``service.informed``).
    informed_settle_ms: int = 5
    #: ``DURABILITY_HOST_ID`` where it is set (``durability.store.host.machine``); None:
    #: the id kept in the state folder.
    host_id: str | None = None
    #: An autostarted service leaves after this long with no request and no
    #: watch (0: never; ``service.server``).
    service_idle_ms: int = 1_800_000

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        """Settings from the environment; ``InvalidInput`` (invalid-value) names
        the first variable that is not a usable number of milliseconds.  The
        hook checks the same table (``durability.ground.envms``) before anything else."""
        return cls(
            state_dir=paths.state_dir(env),
            socket_path=paths.socket_path(env),
            spool_dir=paths.spool_dir(env),
            jj_timeout_s=_number(env, "DURABILITY_JJ_TIMEOUT_MS") / 1000,
            hook_timeout_ms=int(_number(env, "DURABILITY_HOOK_TIMEOUT_MS")),
            burst_quiet_ms=int(_number(env, "DURABILITY_BURST_QUIET_MS")),
            burst_max_ms=int(_number(env, "DURABILITY_BURST_MAX_MS")),
            service_connect_ms=int(_number(env, "DURABILITY_SERVICE_CONNECT_MS")),
            service_answer_ms=int(_number(env, "DURABILITY_SERVICE_ANSWER_MS")),
            max_new_file_size=_size(env, "DURABILITY_MAX_NEW_FILE_SIZE",
                                    DEFAULT_MAX_NEW_FILE_SIZE),
            replication_bound_ms=int(_number(env, "DURABILITY_REPLICATION_BOUND_MS")),
            database_url=_database_url(env),
            informed_worktrees=_count(env, "DURABILITY_INFORMED_WORKTREES",
                                      DEFAULT_INFORMED_WORKTREES),
            informed_watches=_count(env, "DURABILITY_INFORMED_WATCHES", None),
            informed_rescan_ms=int(_number(env, "DURABILITY_INFORMED_RESCAN_MS")),
            informed_settle_ms=int(_number(env, "DURABILITY_INFORMED_SETTLE_MS")),
            service_idle_ms=int(_number(env, "DURABILITY_SERVICE_IDLE_MS")),
            host_id=env.get("DURABILITY_HOST_ID", "").strip() or None,
        )

    def to_env(self) -> dict[str, str]:
        """These settings as the variables that give them to a child process
        (a detached service, a run's task), so it resolves exactly these."""
        extra = {"DURABILITY_DATABASE_URL": self.database_url} if self.database_url else {}
        if self.host_id:  # a service or task records under the id this process does
            extra["DURABILITY_HOST_ID"] = self.host_id
        return extra | {
            "DURABILITY_HOME": str(self.state_dir),
            "DURABILITY_SOCKET": str(self.socket_path),
            "DURABILITY_SPOOL_DIR": str(self.spool_dir),
            "DURABILITY_JJ_TIMEOUT_MS": str(round(self.jj_timeout_s * 1000)),
            "DURABILITY_HOOK_TIMEOUT_MS": str(self.hook_timeout_ms),
            "DURABILITY_BURST_QUIET_MS": str(self.burst_quiet_ms),
            "DURABILITY_BURST_MAX_MS": str(self.burst_max_ms),
            "DURABILITY_SERVICE_CONNECT_MS": str(self.service_connect_ms),
            "DURABILITY_SERVICE_ANSWER_MS": str(self.service_answer_ms),
            "DURABILITY_MAX_NEW_FILE_SIZE": str(self.max_new_file_size),
            "DURABILITY_REPLICATION_BOUND_MS": str(self.replication_bound_ms),
            "DURABILITY_INFORMED_WORKTREES": str(self.informed_worktrees),
            "DURABILITY_INFORMED_RESCAN_MS": str(self.informed_rescan_ms),
            "DURABILITY_INFORMED_SETTLE_MS": str(self.informed_settle_ms),
            "DURABILITY_SERVICE_IDLE_MS": str(self.service_idle_ms),
            **({} if self.informed_watches is None
               else {"DURABILITY_INFORMED_WATCHES": str(self.informed_watches)}),
        }

    @property
    def db_path(self) -> Path:
        """The SQLite state database (used when no ``database_url`` is set)."""
        return self.state_dir / "state.db"

    @property
    def database(self) -> Path | str:
        """Where the state store is: the PostgreSQL URL, else ``db_path``."""
        return self.database_url or self.db_path

    @property
    def spool_dirs(self) -> list[Path]:
        """``paths.spool_dirs``: where gaps are written, in order, and read from."""
        second = self.state_dir / "spool"
        return [self.spool_dir] if self.spool_dir == second else [self.spool_dir, second]

    @property
    def lock_dir(self) -> Path:
        return self.state_dir / "locks"

    @property
    def window_dir(self) -> Path:
        """Where a watch keeps the marker of its open settle window
        (``durability.watch.window``)."""
        return self.state_dir / "windows"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "service.log"


def database_location(env: Mapping[str, str]) -> Path | str:
    """``Settings.database`` for ``env`` without building the settings (the
    hook's last resort, which reads no other setting)."""
    return _database_url(env) or paths.state_dir(env) / "state.db"


def _database_url(env: Mapping[str, str]) -> str | None:
    url = env.get("DURABILITY_DATABASE_URL", "").strip()
    if not url:
        return None
    if not url.startswith(("postgresql://", "postgres://")):
        raise InvalidInput("DURABILITY_DATABASE_URL must be a postgresql:// URL "
                           "(unset it to use state.db)")
    return url


def _number(env: Mapping[str, str], name: str) -> float:
    try:
        return envms.read_ms(env, name)
    except envms.InvalidSetting as exc:
        raise InvalidInput(str(exc)) from None


def _size(env: Mapping[str, str], name: str, default: int) -> int:
    try:
        return envms.read_size(env, name, default)
    except envms.InvalidSetting as exc:
        raise InvalidInput(str(exc)) from None


@overload
def _count(env: Mapping[str, str], name: str, default: int) -> int: ...
@overload
def _count(env: Mapping[str, str], name: str, default: None) -> int | None: ...
def _count(env: Mapping[str, str], name: str, default: int | None) -> int | None:
    """A non-negative whole number, or ``default`` when unset or empty."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or len(raw) > 9:
        raise InvalidInput(f"{name}={raw!r} is not a whole number from 0 to 999999999")
    return int(raw)


def config_file(env: Mapping[str, str] = os.environ) -> Path:
    """The config file (``[retention]``, ``[secrets]``): ``$DURABILITY_CONFIG``,
    else ``config.toml`` in the platform's config folder."""
    explicit = env.get("DURABILITY_CONFIG")
    if explicit:
        return Path(explicit)
    import platformdirs

    return Path(platformdirs.user_config_dir("durability", appauthor=False)) / "config.toml"


def config_tables(env: Mapping[str, str] = os.environ) -> tuple[Path, dict[str, Any]]:
    """The config file and what it holds (nothing when there is no file).
    One that cannot be read, or is not valid TOML, is ``invalid-value``."""
    import tomllib

    path = config_file(env)
    try:
        return path, tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return path, {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidInput(f"cannot read the config file {path}: {exc}") from None
