"""Settings, resolved once at the entry point and passed in."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from durability import paths
from durability.errors import InvalidInput

__all__ = ["Settings"]


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

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        return cls(
            state_dir=paths.state_dir(env),
            socket_path=paths.socket_path(env),
            spool_dir=paths.spool_dir(env),
            jj_timeout_s=_number(env, "DURABILITY_JJ_TIMEOUT_MS", 120_000) / 1000,
            hook_timeout_ms=int(_number(env, "DURABILITY_HOOK_TIMEOUT_MS", 10_000)),
            burst_quiet_ms=int(_number(env, "DURABILITY_BURST_QUIET_MS", 60, zero_ok=True)),
            burst_max_ms=int(_number(env, "DURABILITY_BURST_MAX_MS", 400, zero_ok=True)),
        )

    def to_env(self) -> dict[str, str]:
        """These settings as the variables that give them to a child process
        (a detached service, a run's task), so it resolves exactly these."""
        return {
            "DURABILITY_HOME": str(self.state_dir),
            "DURABILITY_SOCKET": str(self.socket_path),
            "DURABILITY_SPOOL_DIR": str(self.spool_dir),
            "DURABILITY_JJ_TIMEOUT_MS": str(round(self.jj_timeout_s * 1000)),
            "DURABILITY_HOOK_TIMEOUT_MS": str(self.hook_timeout_ms),
            "DURABILITY_BURST_QUIET_MS": str(self.burst_quiet_ms),
            "DURABILITY_BURST_MAX_MS": str(self.burst_max_ms),
        }

    @property
    def db_path(self) -> Path:
        return self.state_dir / "state.db"

    @property
    def spool_dirs(self) -> list[Path]:
        """``paths.spool_dirs``: where gaps are written, in order, and read from."""
        second = self.state_dir / "spool"
        return [self.spool_dir] if self.spool_dir == second else [self.spool_dir, second]

    @property
    def lock_dir(self) -> Path:
        return self.state_dir / "locks"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "service.log"


def _number(env: Mapping[str, str], name: str, default: int, *, zero_ok: bool = False) -> float:
    raw = env.get(name)
    if not raw:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise InvalidInput(f"{name}={raw!r} is not a number of milliseconds") from None
    if value < 0 or (value == 0 and not zero_ok):
        raise InvalidInput(f"{name}={raw!r} must be positive")
    return value
