"""Reading the harnesses' own session transcripts, and writing a shortened
copy as a new session (``durability rewind``, docs/how-to/rewind.md): pure
file formats, versioned, the standard library only.  A format not tested is
refused (``Unsupported``), never guessed."""

from __future__ import annotations

__all__ = ["Unsupported"]


class Unsupported(Exception):
    """A transcript in a format (or version) this module has not been tested
    with: nothing is written."""
