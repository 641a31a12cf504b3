"""Codex CLI's rollout, read and cut (durability/agents/transcripts/codex.py),
on lines shaped as 0.171.0 writes them (the real CLI: tests/e2e/test_rewind_codex.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from durability.agents.transcripts import Unsupported, codex
from durability.agents.transcripts.claude import Turn
from tests.transcripts import rollout

THREAD = "01a2347c-b52c-7652-95ac-36601bb29dc9"


def test_completed_calls_and_a_cut_after_a_calls_output(tmp_path: Path) -> None:
    path = rollout(tmp_path / f"rollout-2026-12-02T00-00-00-{THREAD}.jsonl", THREAD,
                   [("c1", "exec_command"), ("c2", "apply_patch"), ("c3", "exec_command")])
    original = path.read_bytes()
    assert codex.completed_calls(path) == ["c1", "c2", "c3"]
    c = codex.cut(path, "c2")
    assert c.kept[-1]["payload"] == {"type": "custom_tool_call_output", "call_id": "c2",
                                     "output": "Success."}
    assert c.dropped[:2] == [Turn("tool_use", "c3", "exec_command"), Turn("tool_result", "c3")]
    assert c.dropped[-1] == Turn("text", text="done")
    assert (c.session_id, c.versions, c.cwd) == (THREAD, ("0.171.0",), "/w")
    new = codex.new_thread_id()
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                        new)
    written = codex.write_session(c, new)
    assert written.parent == tmp_path and written.name.endswith(f"-{new}.jsonl")
    lines = [json.loads(x) for x in written.read_text().splitlines()]
    assert lines[0]["payload"]["id"] == new and len(lines) == len(c.kept)
    assert lines[1:] == c.kept[1:]
    assert path.read_bytes() == original


def test_a_version_not_tested_and_an_odd_line_are_refused(tmp_path: Path) -> None:
    path = rollout(tmp_path / "r.jsonl", THREAD, [("c1", "exec_command")], version="0.172.0")
    with pytest.raises(Unsupported, match=r"codex 0\.172\.0 .*tested: 0\.171\.0"):
        codex.cut(path, "c1")
    path = rollout(tmp_path / "r.jsonl", THREAD, [("c1", "exec_command")])
    items = path.read_text().splitlines()
    items.insert(2, json.dumps({"type": "compacted", "payload": {}}))
    path.write_text("\n".join(items) + "\n")
    with pytest.raises(Unsupported, match="'compacted' lines"):
        codex.cut(path, "c1")


def test_no_session_meta_an_unknown_call_and_a_parallel_batch(tmp_path: Path) -> None:
    path = rollout(tmp_path / "r.jsonl", THREAD, [("c1", "exec_command")])
    with pytest.raises(LookupError, match="no output"):
        codex.cut(path, "nope")
    items = [json.loads(x) for x in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(i) + "\n" for i in items[1:]))
    with pytest.raises(Unsupported, match="does not start with session_meta"):
        codex.cut(path, "c1")
    meta, rest = items[0], items[1:]
    call = {"timestamp": "t", "type": "response_item",
            "payload": {"type": "function_call", "name": "x", "arguments": "{}",
                        "call_id": "p2"}}
    path.write_text("".join(json.dumps(i) + "\n" for i in [meta, call, *rest]))
    with pytest.raises(Unsupported, match="ran beside p2"):
        codex.cut(path, "c1")
