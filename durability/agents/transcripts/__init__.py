"""Reading the harnesses' own session transcripts, and writing a shortened
copy as a new session (``durability rewind``, docs/how-to/rewind.md): pure
file formats, versioned, the standard library only.  A format not tested is
refused (``Unsupported``), never guessed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["Unsupported", "json_lines", "write_new"]


class Unsupported(Exception):
    """A transcript in a format (or version) this module has not been tested
    with: nothing is written."""


def json_lines(path: Path, max_bytes: int) -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSONL transcript with their line numbers (blank
    lines skipped); ``Unsupported`` for a file too big or unreadable, or a
    line that is not a JSON object."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise Unsupported(f"{path} is {size} bytes, over {max_bytes}")
        raw = path.read_bytes()
    except OSError as exc:
        raise Unsupported(f"cannot read {path}: {exc.strerror or exc}") from None
    out: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise Unsupported(f"{path} line {n} is not JSON") from None
        if not isinstance(item, dict):
            raise Unsupported(f"{path} line {n} is not a JSON object")
        out.append((n, item))
    return out


def write_new(target: Path, data: bytes) -> Path:
    """Write ``data`` as ``target``, a file that must not exist, all or
    nothing: into a hidden temporary file beside it first (a harness lists
    only its own ``*.jsonl`` names), synced, then linked to ``target`` (which
    fails, rather than replaces, should it exist).  A process killed midway
    leaves at most the hidden file, never half a session a harness would
    list and resume."""
    temp = target.with_name(f".{target.name}.{os.getpid()}.partial")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.link(temp, target)
    finally:
        temp.unlink(missing_ok=True)
    try:
        folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return target
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return target
