"""The MCP answers that are engine records (sessions, gaps, attempts,
events) take their fields from those records, so a field the engine adds
reaches the tools' schemas without a second copy to keep in step."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from durability.mcp import models as m
from durability.store.events import Event
from durability.store.models import Attempt, Gap, Session


@pytest.mark.parametrize(("out", "record"), [
    (m.SessionOut, Session), (m.GapOut, Gap), (m.AttemptOut, Attempt), (m.EventOut, Event),
], ids=["session", "gap", "attempt", "event"])
def test_a_mirror_has_the_record_s_fields_in_order(out: type[BaseModel],
                                                     record: type[Any]) -> None:
    assert list(out.model_fields) == [f.name for f in dataclasses.fields(record)]


def test_a_mirror_answers_what_the_record_holds() -> None:
    event = Event(7, 1_000, "run", "claim-won", None, None, None, None, {"owner": "o"})
    assert m.EventOut(**event.to_dict()).model_dump() == event.to_dict()
    gap = Gap(1, "run", "req", "jj-failed", node_id="n", detail="why")
    assert m.GapOut(**gap.to_dict()).model_dump() == gap.to_dict()


def test_the_session_s_harnesses_stay_a_required_answer() -> None:
    schema = m.SessionOut.model_json_schema(mode="serialization")
    assert "harnesses" in schema["required"] and "default" not in schema["properties"]["harnesses"]
