"""The ``DURABILITY_*_MS`` settings: one table and one parser.

Standard library only, and nothing imported at all: the hook reads these on
every tool call (bench/RESULTS.md), and ``durability.config.Settings``
reads them through the same function, so the two can never disagree about
what is valid.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["MAX_MS", "MS_SETTINGS", "InvalidSetting", "first_invalid", "read_ms", "read_size"]

#: name -> (default in ms, whether 0 is allowed).  Documented in docs/reference/environment.md and
#: docs/RELIABILITY.md.
MS_SETTINGS: dict[str, tuple[int, bool]] = {
    # Ceiling on one jj command; a capture that takes longer is a jj-timeout gap.
    "DURABILITY_JJ_TIMEOUT_MS": (120_000, False),
    # The hook's whole budget, from process start to exit.
    "DURABILITY_HOOK_TIMEOUT_MS": (10_000, False),
    # Burst coalescing in the service (durability.capture.coalesce).
    "DURABILITY_BURST_QUIET_MS": (60, True),
    "DURABILITY_BURST_MAX_MS": (400, True),
    # How long the hook waits to connect to the service (a full backlog of a
    # stopped or flooded service) before capturing in-process.
    "DURABILITY_SERVICE_CONNECT_MS": (200, False),
    # How long the hook waits for the service's answer before capturing
    # in-process; never more than half of what is left of the hook budget.
    "DURABILITY_SERVICE_ANSWER_MS": (3_000, False),
    # A checkpoint not on a remote of its worktree this long after its
    # capture is filed as a replication-failed gap (docs/how-to/remote.md).
    "DURABILITY_REPLICATION_BOUND_MS": (300_000, False),
    # The longest a watched worktree goes without a full capture: writes
    # inotify never reports (mmap, a hard link made from outside) are taken
    # within this long (0: never; docs/DESIGN.md contract 2).
    "DURABILITY_INFORMED_RESCAN_MS": (60_000, True),
    # How long a watched jj worktree's tree must stay still before the
    # service snapshots it ahead of the hook, which is then answered from
    # that snapshot when nothing changed since it began (0: never;
    # docs/decisions/0047).
    "DURABILITY_INFORMED_SETTLE_MS": (5, True),
    # A service a hook started leaves after this long with no request and no
    # watch; the next hook starts one again (0: never).
    "DURABILITY_SERVICE_IDLE_MS": (1_800_000, True),
}
#: A day: anything longer is a typo (and overflows some timers).
MAX_MS = 86_400_000


class InvalidSetting(ValueError):
    """A ``DURABILITY_*_MS`` value that is not a usable number of milliseconds."""


def read_ms(env: Mapping[str, str], name: str) -> float:
    """The value of setting ``name`` in ms: its default when unset or empty."""
    default, zero_ok = MS_SETTINGS[name]
    raw = env.get(name)
    if not raw:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise InvalidSetting(f"{name}={raw[:40]!r} is not a number of milliseconds") from None
    if value != value or value in (float("inf"), float("-inf")):  # nan, inf parse as floats
        raise InvalidSetting(f"{name}={raw[:40]!r} is not a number of milliseconds")
    if value > MAX_MS:
        raise InvalidSetting(f"{name}={raw[:40]!r} must be at most {MAX_MS} ms")
    # Below 1 ms a timeout is 0 once rounded: only settings that allow 0 may be.
    if value < 0 or (value < 1 and not zero_ok):
        raise InvalidSetting(
            f"{name}={raw[:40]!r} must be {'0 or more' if zero_ok else 'at least 1'}")
    return value


_SIZE_UNITS = {"": 1, "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2,
               "g": 1024**3, "gib": 1024**3}


def read_size(env: Mapping[str, str], name: str, default: int) -> int:
    """A byte count: ``67108864``, ``64MiB``, ``64M`` (powers of 1024)."""
    raw = env.get(name)
    if not raw:
        return default
    text = raw.strip().lower()
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyz ")
    unit = _SIZE_UNITS.get(text[len(digits):].strip())
    if not digits.isdigit() or unit is None or int(digits) == 0:
        raise InvalidSetting(f"{name}={raw[:40]!r} is not a positive size in bytes (e.g. "
                             "67108864 or 64MiB)")
    return int(digits) * unit


def first_invalid(env: Mapping[str, str]) -> str | None:
    """The message for the first invalid setting in ``env``; None when all are valid."""
    try:
        for name in MS_SETTINGS:
            read_ms(env, name)
        read_size(env, "DURABILITY_MAX_NEW_FILE_SIZE", 1)
    except InvalidSetting as exc:
        return str(exc)
    return None
