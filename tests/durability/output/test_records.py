"""The output models of one record take their fields from that record, so a
field the store or the library adds lands once: mirrored where the model
is the record, checked here where it is written out (the library's diff
values live beside libgit2, which this room does not load)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from durability import output as o
from durability.inspect.diff import FileChange, Sizes, Totals
from durability.inspect.timeline import Entry
from durability.store.boundaries import Boundary
from durability.store.events import Event
from durability.store.models import Attempt, Checkpoint, Gap, Session
from durability.store.remote_rows import Remote
from durability.store.transfer import TableCopy


def _names(record: type[Any]) -> list[str]:
    return [f.name for f in dataclasses.fields(record)]


@pytest.mark.parametrize(("out", "record"), [
    (o.SessionOut, Session), (o.GapOut, Gap), (o.AttemptOut, Attempt), (o.EventOut, Event),
    (o.CheckpointRecordOut, Checkpoint), (o.FileChangeOut, FileChange), (o.TotalsOut, Totals),
    (o.SizesOut, Sizes), (o.TableCopyOut, TableCopy),
], ids=["session", "gap", "attempt", "event", "checkpoint", "file", "totals", "sizes", "table"])
def test_a_record_s_model_has_the_record_s_fields_in_order(out: type[BaseModel],
                                                             record: type[Any]) -> None:
    assert list(out.model_fields) == _names(record)


def test_the_listed_and_side_checkpoints_are_parts_of_the_record() -> None:
    whole = set(_names(Checkpoint))
    assert set(o.CheckpointOut.model_fields) <= whole
    assert set(o.SideOut.model_fields) <= whole
    assert set(o.RemoteRowOut.model_fields) == set(_names(Remote))


def test_a_log_entry_is_its_kind_then_the_record() -> None:
    assert list(o.LogCheckpointOut.model_fields) == ["kind", *_names(Checkpoint), "base",
                                                      "totals", "boundaries"]
    assert list(o.LogGapOut.model_fields) == ["kind", *_names(Gap)]
    assert list(o.LogCallOut.model_fields) == ["kind", *_names(Boundary)]


def _checkpoint(seq: int, **more: Any) -> Checkpoint:
    return Checkpoint("run", "n", 0, 1, seq, f"c{seq}", None, None, "/wt", "hook", None, None,
                      f"req{seq}", 1_000 + seq, **more)


def test_a_mirror_answers_what_the_record_holds() -> None:
    event = Event(7, 1_000, "run", "claim-won", None, None, None, None, {"owner": "o"})
    assert o.EventOut.from_record(event).dump() == dataclasses.asdict(event)
    gap = Gap(1, "run", "req", "jj-failed", node_id="n", detail="why")
    assert o.GapOut.from_record(gap).dump() == dataclasses.asdict(gap)
    c = _checkpoint(2, harness="codex")
    assert list(o.CheckpointRecordOut.from_record(c).dump().items()) == list(
        dataclasses.asdict(c).items())


def test_a_log_entry_dumps_as_log_json_prints_it() -> None:
    c, base = _checkpoint(2), _checkpoint(1)
    entry = o.entry_out(Entry(c.created_at_ms, c, base, Sizes(1, 2, 3))).dump()
    assert list(entry) == ["kind", *_names(Checkpoint), "base", "totals", "boundaries"]
    assert entry["boundaries"] == []
    assert entry["kind"] == "checkpoint" and entry["seq"] == 2
    assert entry["base"] == {"run_id": "run", "node_id": "n", "iteration": 0, "attempt": 1,
                             "seq": 1, "commit_id": "c1"}
    assert entry["totals"] == {"files": 1, "old_bytes": 2, "new_bytes": 3}
    first = o.entry_out(Entry(c.created_at_ms, c)).dump()
    assert first["base"] is None and first["totals"] is None
    call = Boundary("run", 4, "n", 0, 1, "req9", "claude", "toolu_9", "Read", "PostToolUse",
                    "/t.jsonl", 10, 2, "c2", "/wt", 1_009)
    assert o.entry_out(Entry(c.created_at_ms, c), [call]).dump()["boundaries"] == [
        {"session": "run", "seq": 4, "call": "toolu_9", "tool_name": "Read"}]
    gap = Gap(5, "run", "req", "jj-failed")
    assert o.entry_out(Entry(5, gap=gap)).dump() == {"kind": "gap",
                                                             **dataclasses.asdict(gap)}
    # A call whose checkpoint gc collected (decision 0061): its boundary row.
    gone = dataclasses.replace(call, commit_id="")
    assert o.entry_out(Entry(gone.created_at_ms, call=gone)).dump() == {
        "kind": "call-collected", **dataclasses.asdict(gone)}


def test_diff_names_its_first_side_from() -> None:
    out = o.ChangesOut.model_validate({"from": None, "to": "worktree", "files": [],
                                       "totals": {"files": 0, "additions": 0,
                                                  "deletions": 0}}).dump()
    assert list(out) == ["from", "to", "files", "totals"]


def test_the_session_s_harnesses_stay_a_required_answer() -> None:
    schema = o.SessionOut.model_json_schema(mode="serialization")
    assert "harnesses" in schema["required"] and "default" not in schema["properties"]["harnesses"]
