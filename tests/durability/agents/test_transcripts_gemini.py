"""Gemini CLI's chat file, read and cut (durability/agents/transcripts/gemini.py),
on lines shaped as 0.61.0 writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.agents.transcripts import Unsupported, gemini
from durability.agents.transcripts.claude import Turn
from tests.transcripts import gemini_chat


def _chat(tmp_path: Path) -> Path:
    folder = tmp_path / "chats"
    folder.mkdir()
    return gemini_chat(folder / "session-2026-12-02T00-00-aaaaaaaa.jsonl", "aaaaaaaa-1",
                       [("c1", "write_file"), ("c2", "run_shell_command"), ("c3", "read_file")])


def test_calls_by_position_and_a_cut_after_one(tmp_path: Path) -> None:
    path = _chat(tmp_path)
    original = path.read_bytes()
    assert gemini.completed_calls(path) == ["write_file__c1", "run_shell_command__c2",
                                            "read_file__c3"]
    assert gemini.call_at(path, 1, "run_shell_command") == "run_shell_command__c2"
    with pytest.raises(LookupError, match="does not hold call 2 as read_file"):
        gemini.call_at(path, 1, "read_file")
    c = gemini.cut(path, "run_shell_command__c2")
    assert [m["id"] for m in c.kept] == ["m0", "g0", "u0", "g1", "u1"]
    assert c.kept[3]["toolCalls"][0]["id"] == "run_shell_command__c2"  # the record, upserted
    assert c.dropped == [Turn("tool_use", "read_file__c3", "read_file"),
                         Turn("tool_result", "read_file__c3"), Turn("text", text="done")]
    new_id, written = gemini.write_session(c)
    assert written.parent == path.parent and written.name.endswith(f"-{new_id[:8]}.jsonl")
    header, patch = [json.loads(x) for x in written.read_text().splitlines()]
    assert header["sessionId"] == new_id and header["projectHash"] == "ab" * 32
    assert patch == {"$set": {"messages": c.kept}}
    assert path.read_bytes() == original


def test_shapes_not_tested_are_refused(tmp_path: Path) -> None:
    path = _chat(tmp_path)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, json.dumps({"kind": "rewind-marker"})]) + "\n")
    with pytest.raises(Unsupported, match="of a kind not tested"):
        gemini.cut(path, "write_file__c1")
    path.write_text("\n".join(lines[1:]) + "\n")
    with pytest.raises(Unsupported, match="no header"):
        gemini.completed_calls(path)
