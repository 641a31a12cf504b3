"""Claude Code's transcript, read and cut (durability/agents/transcripts/claude.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.agents.transcripts import Unsupported, claude
from tests.transcripts import line, transcript


def test_completed_calls_are_the_calls_with_a_result(tmp_path: Path) -> None:
    path = transcript(tmp_path / "s.jsonl", "s", [("t1", "Write"), ("t2", "Bash")])
    with path.open("a") as f:  # a call still running: asked for, no result yet
        f.write(json.dumps(line("assistant", "a9", "end", [
            {"type": "tool_use", "id": "t3", "name": "Bash", "input": {}}], session="s")) + "\n")
    assert claude.completed_calls(path) == ["t1", "t2"]


def test_a_cut_keeps_the_lines_up_to_the_calls_result_and_names_the_rest(
        tmp_path: Path) -> None:
    path = transcript(tmp_path / "s.jsonl", "s", [("t1", "Write"), ("t2", "Read"),
                                                  ("t3", "Bash")])
    original = path.read_bytes()
    c = claude.cut(path, "t2")
    assert [i.get("uuid") for i in c.kept] == [None, "u0", "a0", "r0", "a1", "r1"]
    assert c.dropped == [claude.Turn("tool_use", "t3", "Bash"), claude.Turn("tool_result", "t3"),
                         claude.Turn("text", text="done")]
    assert (c.session_id, c.versions) == ("s", ("2.1.197",))
    written = claude.write_session(c, "new-id")
    assert written == tmp_path / "new-id.jsonl"
    lines = [json.loads(x) for x in written.read_text().splitlines()]
    assert [x.get("uuid") for x in lines] == [i.get("uuid") for i in c.kept]
    assert {x["sessionId"] for x in lines} == {"new-id"}
    assert path.read_bytes() == original
    with pytest.raises(FileExistsError):  # never over an existing session
        claude.write_session(c, "new-id")


def test_a_version_not_tested_is_refused(tmp_path: Path) -> None:
    path = transcript(tmp_path / "s.jsonl", "s", [("t1", "Write")], version="2.1.250")
    with pytest.raises(Unsupported, match=r"claude 2\.1\.250 .*tested: 2\.1\.197"):
        claude.cut(path, "t1")


def test_a_line_of_a_kind_not_tested_is_refused(tmp_path: Path) -> None:
    path = transcript(tmp_path / "s.jsonl", "s", [("t1", "Write"), ("t2", "Bash")])
    items = path.read_text().splitlines()
    items.insert(3, json.dumps({"type": "file-history-delta", "messageId": "a0"}))
    path.write_text("\n".join(items) + "\n")
    with pytest.raises(Unsupported, match="'file-history-delta' line"):
        claude.cut(path, "t2")


def test_a_cut_inside_a_parallel_batch_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    items = [line("user", "u0", None, "go", session="s"),
             line("assistant", "a0", "u0", [{"type": "tool_use", "id": "p1", "name": "Read",
                                             "input": {}}], session="s"),
             line("assistant", "a1", "a0", [{"type": "tool_use", "id": "p2", "name": "Read",
                                             "input": {}}], session="s"),
             line("user", "r0", "a1", [{"type": "tool_result", "tool_use_id": "p1"}],
                  session="s"),
             line("user", "r1", "r0", [{"type": "tool_result", "tool_use_id": "p2"}],
                  session="s")]
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    with pytest.raises(Unsupported, match="ran beside p2 in one parallel batch"):
        claude.cut(path, "p1")
    assert len(claude.cut(path, "p2").kept) == 5


def test_an_unknown_call_and_an_unreadable_file(tmp_path: Path) -> None:
    path = transcript(tmp_path / "s.jsonl", "s", [("t1", "Write")])
    with pytest.raises(LookupError, match="tool call nope has no result"):
        claude.cut(path, "nope")
    with pytest.raises(Unsupported, match="cannot read"):
        claude.cut(tmp_path / "missing.jsonl", "t1")
    path.write_text("not json\n")
    with pytest.raises(Unsupported, match="line 1 is not JSON"):
        claude.completed_calls(path)


def test_the_project_folder_is_the_cwd_with_every_other_character_a_dash() -> None:
    assert claude.project_folder(Path("/h/.claude"), "/tmp/rw-x_1/repo é") == \
        Path("/h/.claude/projects/-tmp-rw-x-1-repo--")
