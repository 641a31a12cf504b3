"""Text that may not be valid Unicode, stored without loss.

Paths are bytes on Linux.  Python hands a path that is not UTF-8 around as a
``str`` holding lone surrogates (``os.fsdecode``, the surrogateescape error
handler), which SQLite's UTF-8 TEXT cannot hold.  Such a value is stored as a
BLOB of the path's own bytes and read back as the same ``str``; valid text
stays TEXT, so existing rows and queries are unchanged.

PostgreSQL's text holds no NUL either (SQLite's does).  There a value with a
NUL is stored escaped (``escape_nul``: a marker character, then the text with
``\\`` and NUL written as ``\\\\`` and ``\\0``) and read back unescaped
(``unescape_nul``); so is a value that begins with the marker, so the escape
is lossless for every text.  Deterministic: a lookup by such a value finds it.
Everything else is stored as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from typing import TypeVar

__all__ = ["NUL_MARK", "escape_nul", "from_db", "row_from_db", "storable", "storable_gap",
           "to_db", "unescape_nul"]

_T = TypeVar("_T")
#: The longest text ``storable`` keeps whole (PostgreSQL indexes a value of
#: at most about 2,700 bytes; UTF-8 takes up to 4 per character).
STORABLE_CHARS = 600

#: The first character of an escaped value: a Unicode noncharacter, which
#: no payload has reason to begin with.
NUL_MARK = "\ufdd0"
_ESCAPED = re.compile(r"\\([\\0])")


def to_db(value: str | None) -> str | bytes | None:
    """``value`` as SQLite can hold it: text, or the bytes of a path that is not UTF-8.

    A lone surrogate outside surrogateescape's range (U+D800..U+DC7F,
    U+DD00..U+DFFF: a broken JSON escape, never a path) names no bytes at all;
    it is kept escaped as ``\\udXXX`` text so the row is still written.
    """
    if value is None:
        return None
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")


def from_db(value: object) -> object:
    """The inverse of ``to_db`` for one column (other types pass through)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return value


def row_from_db(row: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(from_db(v) for v in row)


def escape_nul(value: str) -> str:
    """``value`` without NUL, for a database whose text cannot hold it
    (``unescape_nul`` is its inverse); unchanged unless it holds a NUL or
    begins with ``NUL_MARK``."""
    if "\x00" not in value and not value.startswith(NUL_MARK):
        return value
    return NUL_MARK + value.replace("\\", "\\\\").replace("\x00", "\\0")


def unescape_nul(value: str) -> str:
    """The text ``escape_nul`` was given."""
    if not value.startswith(NUL_MARK):
        return value
    return _ESCAPED.sub(lambda m: "\x00" if m.group(1) == "0" else "\\", value[1:])


def storable(value: str) -> str:
    """``value`` in a form every database holds and indexes: text longer than
    ``STORABLE_CHARS`` is cut there and ends with the SHA-256 of the whole,
    so two long values stay apart and the same value always maps the same
    way (a record filed again is still found)."""
    if len(value) <= STORABLE_CHARS:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{value[:STORABLE_CHARS]}...[{len(value)} chars, sha256 {digest}]"


def storable_gap(gap: _T) -> _T:
    """A gap (any dataclass) with every text field ``storable``: the form a
    gap the database refused as it was is recorded in."""
    changes = {f.name: storable(v) for f in dataclasses.fields(gap)  # type: ignore[arg-type]
               if isinstance(v := getattr(gap, f.name), str)}
    return dataclasses.replace(gap, **changes)  # type: ignore[type-var]
