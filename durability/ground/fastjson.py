"""JSON for the hook's fast path without importing ``json``.

``json`` imports ``re`` (and with it ``enum`` and the regex compiler), about
6 ms of every hook call (bench/RESULTS.md).  The parsing itself is CPython's
C scanner, ``_json.make_scanner``, which ``json`` uses too; this module only
skips the Python wrapper.  Anything unusual (bytes that are not UTF-8, an
error, a type the small encoder does not know) goes to ``json`` itself, so
results and errors are exactly ``json``'s.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["dumps", "loads"]

try:
    import _json
except ImportError:  # not CPython: the plain module is the fast path
    _json = None  # type: ignore[assignment]

_WHITESPACE = " \t\n\r"


class _Context:
    """The attributes ``_json.make_scanner`` reads, as ``json.loads`` sets them."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {
        "NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf"),
    }.__getitem__


_scan = _json.make_scanner(_Context()) if _json is not None else None  # type: ignore[arg-type]


def loads(data: bytes | str) -> Any:
    """``json.loads(data)``."""
    if _scan is None:
        return _slow_loads(data)
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError:
        return _slow_loads(data)
    text = text.strip(_WHITESPACE)
    try:
        value, end = _scan(text, 0)
    except Exception:  # the slow path raises json's own error for it
        return _slow_loads(data)
    if end != len(text) or text.startswith("\ufeff"):
        return _slow_loads(data)
    return value


def dumps(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"))`` for plain data."""
    try:
        return _encode(value)
    except TypeError:
        import json

        return json.dumps(value, separators=(",", ":"))


def _encode(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("non-string key")
        return "{" + ",".join(_quote(k) + ":" + _encode(v) for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    raise TypeError(f"not encoded here: {type(value).__name__}")


def _quote(text: str) -> str:
    if _json is None:
        raise TypeError("no _json")
    return str(_json.encode_basestring_ascii(text))


def _slow_loads(data: bytes | str) -> Any:
    import json

    return json.loads(data)
