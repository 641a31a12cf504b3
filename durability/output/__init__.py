"""The output room: one set of pydantic models for every answer a person or
a program reads, the CLI's ``--json``, the MCP tools' structured answers
and the JSON of the library's results, so a field is written once.

``records`` holds the answers built from one record (a session, a
checkpoint, a gap, a file change...), ``answers`` the answers of commands
and tools that put records together.  A model is built from a library
value with ``FooOut.from_record(value)`` (the store and the library never
import this room: the store stands alone and the hook's fast path and the
service's capture path never load pydantic) and printed with ``dump()``,
which is what ``--json`` prints and what an MCP answer carries.

Importing this package is cheap: a model is loaded (with pydantic, about
60 ms) on first use, so a command can name ``output.FooOut`` in its JSON
branch and pay for pydantic only when it prints JSON."""

from __future__ import annotations

# typing is not imported at run time (as in durability/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from durability.output.answers import (
        AttemptsOut,
        ChangesOut,
        CheckpointListedOut,
        CheckpointsOut,
        DecisionOut,
        DiffOut,
        ErrorOut,
        GapsOut,
        GcPreviewOut,
        LogOut,
        LogsOut,
        PreviewOut,
        RemotesOut,
        RequestOut,
        RestoredOut,
        RestoreOut,
        RunOutcomeOut,
        RunsOut,
        RunStatusOut,
        ServiceStatusOut,
        SessionsOut,
        ShownOut,
        ShowOut,
        SnapshotOut,
        StartedOut,
        StoppedOut,
        UndoOut,
        WorkerOut,
    )
    from durability.output.base import Out, mirror
    from durability.output.records import (
        AttemptOut,
        BoundaryRefOut,
        CheckpointOut,
        CheckpointRecordOut,
        EventOut,
        FileChangeOut,
        GapOut,
        LogCallOut,
        LogCheckpointOut,
        LogGapOut,
        PointOut,
        RemoteOut,
        RemoteRowOut,
        SessionOut,
        SideOut,
        SizesOut,
        TableCopyOut,
        TotalsOut,
        entry_out,
        files_out,
    )
    from durability.output.rewind import BoundaryOut, RewoundOut

__all__ = [
    "AttemptOut",
    "AttemptsOut",
    "BoundaryOut",
    "BoundaryRefOut",
    "ChangesOut",
    "CheckpointListedOut",
    "CheckpointOut",
    "CheckpointRecordOut",
    "CheckpointsOut",
    "DecisionOut",
    "DiffOut",
    "ErrorOut",
    "EventOut",
    "FileChangeOut",
    "GapOut",
    "GapsOut",
    "GcPreviewOut",
    "LogCallOut",
    "LogCheckpointOut",
    "LogGapOut",
    "LogOut",
    "LogsOut",
    "Out",
    "PointOut",
    "PreviewOut",
    "RemoteOut",
    "RemoteRowOut",
    "RemotesOut",
    "RequestOut",
    "RestoreOut",
    "RestoredOut",
    "RewoundOut",
    "RunOutcomeOut",
    "RunStatusOut",
    "RunsOut",
    "ServiceStatusOut",
    "SessionOut",
    "SessionsOut",
    "ShowOut",
    "ShownOut",
    "SideOut",
    "SizesOut",
    "SnapshotOut",
    "StartedOut",
    "StoppedOut",
    "TableCopyOut",
    "TotalsOut",
    "UndoOut",
    "WorkerOut",
    "entry_out",
    "files_out",
    "mirror",
]


#: The modules the names live in, searched in this order.
_MODULES = ("durability.output.records", "durability.output.answers", "durability.output.base",
            "durability.output.rewind")


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        for module in _MODULES:
            found = getattr(importlib.import_module(module), name, None)
            if found is not None:
                return found
    raise AttributeError(f"module 'durability.output' has no attribute {name!r}")
