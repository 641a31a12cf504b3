"""Text that may not be valid Unicode, stored without loss.

Paths are bytes on Linux.  Python hands a path that is not UTF-8 around as a
``str`` holding lone surrogates (``os.fsdecode``, the surrogateescape error
handler), which SQLite's UTF-8 TEXT cannot hold.  Such a value is stored as a
BLOB of the path's own bytes and read back as the same ``str``; valid text
stays TEXT, so existing rows and queries are unchanged.
"""

from __future__ import annotations

__all__ = ["from_db", "row_from_db", "to_db"]


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
