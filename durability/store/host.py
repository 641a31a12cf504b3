"""This machine's id in the store: ``host_id``.

A worktree is known by its machine and its path together: two machines
sharing one PostgreSQL store whose repositories sit at one path (a fleet of
containers at ``/workspace``) are two worktrees, never one.  Run ownership
uses the same id (``durability.runs.fence``): a pid is checked only on the machine
that recorded it.  Two state folders on one machine are two machines there
too (a dead owner from the other is judged by its heartbeat alone): the
safe side, where the host name would have cloned containers check each
other's pids.

The id is ``DURABILITY_HOST_ID`` when it is set, else a random one made once
and kept in the state folder (``host-id``), so it does not change with the
host name (a laptop renamed by its network, a container recreated with a
new host name on the same state volume) and each state folder (each of a
fleet's containers) is a machine of its own.  Only when the state folder
cannot keep it (not writable; no hard links, which a race-free creation
needs) is it the host name (``machine().source`` says so, and
``durability doctor`` shows it).
"""

from __future__ import annotations

import os
import re
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["HOST_ID_FILE", "Machine", "host_id", "id_host_part", "machine", "made_under",
           "sql_literal", "state_dir"]

#: The file in the state folder that keeps this machine's id.
HOST_ID_FILE = "host-id"
# What a kept id may be: readable, no space, no path separator.
_KEPT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_MADE = re.compile(r"(.+)-[0-9a-f]{12}")
_lock = threading.Lock()
# The id of each state folder this process has used (tests change
# DURABILITY_HOME between tests in one process).
_cache: dict[str, Machine] = {}


@dataclass(frozen=True)
class Machine:
    """This machine's id and where it comes from."""

    id: str
    #: "env" (``DURABILITY_HOST_ID``), "kept" (the state folder's
    #: ``host-id``) or "host-name" (the fallback: the state folder cannot keep one).
    source: str
    #: The ``host-id`` file (for "kept"; for "host-name", the one that could not be used).
    path: str = ""
    #: For "host-name": why the file could not be used.
    reason: str = ""


def state_dir(env: Mapping[str, str] = os.environ) -> str:
    """The state folder, as ``durability.ground.paths.state_dir`` finds it:
    ``$DURABILITY_HOME``, else the platform's user state folder (engine
    cannot import durability; a test checks the two agree)."""
    if env.get("DURABILITY_HOME"):
        from pathlib import Path

        return str(Path(env["DURABILITY_HOME"]).expanduser().absolute())
    import platformdirs

    return str(platformdirs.user_state_dir("durability", appauthor=False))


def host_id(env: Mapping[str, str] = os.environ) -> str:
    """This machine's id in run ownership and worktree keys (``machine``)."""
    return machine(env).id


def machine(env: Mapping[str, str] = os.environ) -> Machine:
    """``DURABILITY_HOST_ID``, else the id kept in the state folder (made on
    first use, ``<host name>-<12 hex>``), else the host name."""
    explicit = env.get("DURABILITY_HOST_ID", "").strip()
    if explicit:
        return Machine(explicit, "env")
    folder = state_dir(env)
    with _lock:
        found = _cache.get(folder)
        if found is None:
            found = _cache[folder] = _kept(folder)
        return found


def _kept(folder: str) -> Machine:
    path = os.path.join(folder, HOST_ID_FILE)
    try:
        kept = _read(path)
        if kept is None:
            _make(folder, path)
            kept = _read(path)
    except OSError as exc:
        return Machine(socket.gethostname(), "host-name", path,
                       f"cannot keep an id in {path}: {exc.strerror or exc}")
    if kept is None or not _KEPT.fullmatch(kept):
        return Machine(socket.gethostname(), "host-name", path,
                       f"{path} holds no usable id (remove it to make a new one)")
    return Machine(kept, "kept", path)


def id_host_part() -> str:
    """This host name as a new id begins with it."""
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname()).strip(".-")[:40] or "host"


def made_under(kept: str) -> str | None:
    """The host name part of an id ``_make`` made, or ``None`` for another
    (one written by hand)."""
    found = _MADE.fullmatch(kept)
    return found.group(1) if found else None


def _read(path: str) -> str | None:
    """The kept id, or ``None`` when there is no file.  The file only ever
    appears whole (``_make`` links a complete one into place)."""
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("ascii", "replace").strip()
    except FileNotFoundError:
        return None


def _make(folder: str, path: str) -> None:
    """Put a fresh id at ``path``: written whole to a draft of its own, then
    linked to the final name, so of processes racing the first one's id wins
    and every one reads it whole."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fresh = f"{id_host_part()}-{os.urandom(6).hex()}"
    draft = os.path.join(folder, f".{HOST_ID_FILE}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                 0o600)
    try:
        try:
            os.write(fd, f"{fresh}\n".encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(draft, path)
        except FileExistsError:
            return  # another process made it first: its id is the one
        _sync_folder(folder)  # an id lost to a crash would hide what was recorded under it
    finally:
        try:
            os.unlink(draft)
        except FileNotFoundError:
            pass


def _sync_folder(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal (for a migration, which takes no
    parameters)."""
    return "'" + text.replace("'", "''") + "'"
