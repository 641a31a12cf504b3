"""``durability rewind`` (durability/rewind/): the refusal path, the dry
run, each half alone, on boundaries recorded by the real hook (in process)
in a real git repository; the transcript is shaped as Claude Code 2.1.197
writes it (tests/transcripts.py; the real CLI: tests/e2e/test_rewind.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import hook_payload, make_git_repo, run_cli, run_cli_json, tree_manifest
from tests.transcripts import transcript

SESSION = "9d7c1c4e-0000-4000-8000-000000000001"


def _session(tmp_path: Path, *, version: str = "2.1.197",
             extra: dict[str, str] | None = None) -> tuple[Path, Path]:
    """Write a.txt (t1), Read it (t2), delete it (t3): three boundaries."""
    repo = make_git_repo(tmp_path / "repo")
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    path = transcript(folder / f"{SESSION}.jsonl", SESSION,
                      [("t1", "Write"), ("t2", "Read"), ("t3", "Bash")], version=version,
                      cwd=str(repo))
    steps = [("t1", "Write", lambda: (repo / "a.txt").write_text("a\n")),
             ("t2", "Read", lambda: None), ("t3", "Bash", lambda: (repo / "a.txt").unlink())]
    for call, tool, act in steps:
        act()
        payload = hook_payload(repo, session_id=SESSION, tool_use_id=call, tool_name=tool,
                               transcript_path=str(path), **(extra or {}))
        done = run_cli("snapshot-hook", input=json.dumps(payload))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    return repo, path


def test_the_dry_run_lists_files_and_turns_and_changes_nothing(tmp_path: Path) -> None:
    repo, path = _session(tmp_path)
    before, files = tree_manifest(repo), sorted(path.parent.iterdir())
    seen = run_cli_json("rewind", SESSION, "--call", "t2", "--dry-run")
    assert seen["dry_run"] is True
    assert (seen["boundary"]["seq"], seen["boundary"]["tool_use_id"]) == (2, "t2")
    assert [w["path"] for w in seen["code"]["write"]] == ["a.txt"]
    assert [(t["kind"], t["tool_use_id"]) for t in seen["conversation"]["dropped"]] == [
        ("tool_use", "t3"), ("tool_result", "t3"), ("text", None)]
    assert seen["conversation"]["session_id"] is None
    text = run_cli("rewind", SESSION, "--seq", "2", "--dry-run")
    assert text.returncode == 0, text.stderr
    assert "would drop 3 turns after t2" in text.stdout and "tool_use t3 (Bash)" in text.stdout
    assert tree_manifest(repo) == before and sorted(path.parent.iterdir()) == files


def test_a_rewind_writes_a_new_session_and_restores_the_boundarys_tree(tmp_path: Path) -> None:
    repo, path = _session(tmp_path)
    original = path.read_bytes()
    done = run_cli("rewind", SESSION, "--call", "t2")
    assert done.returncode == 0, done.stderr
    assert (repo / "a.txt").read_text() == "a\n"
    assert path.read_bytes() == original
    [new] = [p for p in path.parent.iterdir() if p != path]
    assert f"claude --resume {new.stem}" in done.stdout
    assert "undo: durability restore" in done.stdout
    kept = [json.loads(x) for x in new.read_text().splitlines()]
    assert kept[-1]["message"]["content"][0]["tool_use_id"] == "t2"


def test_a_version_not_tested_refuses_before_anything_changes_and_code_only_works(
        tmp_path: Path) -> None:
    repo, path = _session(tmp_path, version="2.1.250")
    before, files = tree_manifest(repo), sorted(path.parent.iterdir())
    refused = run_cli("rewind", SESSION, "--call", "t2")
    assert refused.returncode == 17
    assert refused.stderr.startswith("durability: conversation-unsupported: claude: claude "
                                     "2.1.250 ")
    assert "--code-only" in refused.stderr
    assert tree_manifest(repo) == before and sorted(path.parent.iterdir()) == files
    done = run_cli_json("rewind", SESSION, "--call", "t2", "--code-only")
    assert done["conversation"] is None and done["code"]["written"] == 1
    assert (repo / "a.txt").read_text() == "a\n"
    assert sorted(path.parent.iterdir()) == files


def test_conversation_only_leaves_the_files(tmp_path: Path) -> None:
    repo, path = _session(tmp_path)
    before = tree_manifest(repo)
    done = run_cli_json("rewind", SESSION, "--seq", "1", "--conversation-only")
    assert done["code"] is None and tree_manifest(repo) == before
    assert Path(done["conversation"]["path"]).parent == path.parent
    assert done["conversation"]["cwd"] == str(repo)


def test_a_codex_session_with_no_rollout_is_refused_for_its_conversation(
        tmp_path: Path) -> None:
    # Codex's payload shape, and a transcript that is no Codex rollout.
    repo, _ = _session(tmp_path, extra={"turn_id": "turn-1"})
    refused = run_cli("rewind", SESSION, "--seq", "2")
    assert refused.returncode == 17
    assert refused.stderr.startswith("durability: conversation-unsupported: codex: ")
    assert run_cli("rewind", SESSION, "--seq", "2", "--code-only").returncode == 0
    assert (repo / "a.txt").exists()


def test_bad_choices(tmp_path: Path) -> None:
    _session(tmp_path)
    both = run_cli("rewind", SESSION, "--seq", "1", "--call", "t1")
    assert both.returncode == 2 and "invalid-value" in both.stderr
    only = run_cli("rewind", SESSION, "--seq", "1", "--code-only", "--conversation-only")
    assert only.returncode == 2
    missing = run_cli("rewind", SESSION, "--seq", "9")
    assert missing.returncode == 3 and "(seq 1 to 3)" in missing.stderr


def test_log_and_show_list_each_checkpoints_boundaries(tmp_path: Path) -> None:
    repo, _ = _session(tmp_path)
    log = run_cli_json("log", str(repo))
    calls = {e["seq"]: [(b["session"], b["seq"], b["call"]) for b in e["boundaries"]]
             for e in log if e["kind"] == "checkpoint"}
    # The Read changed nothing: its boundary names the Write's checkpoint.
    assert calls == {1: [(SESSION, 1, "t1"), (SESSION, 2, "t2")], 2: [(SESSION, 3, "t3")]}
    text = run_cli("log", str(repo)).stdout
    assert "[calls 1 2]" in text and "[calls 3]" in text
    shown = run_cli_json("show", SESSION, "--seq", "1")
    assert [(b["seq"], b["call"], b["tool_name"]) for b in shown["boundaries"]] == [
        (1, "t1", "Write"), (2, "t2", "Read")]
    assert "boundaries: seq 1 (t1 Write), seq 2 (t2 Read)" in run_cli(
        "show", SESSION, "--seq", "1").stdout


def test_a_gemini_session_has_boundaries_by_seq_and_refuses_an_unknown_chat(
        tmp_path: Path) -> None:
    """Gemini CLI's AfterTool payload carries no tool call id (0.61.0): its
    boundaries are named by seq; the conversation half refuses."""
    repo = make_git_repo(tmp_path / "repo")
    chat = tmp_path / "chat.json"
    chat.write_text("{}\n")
    for n, tool in enumerate(["write_file", "read_file"]):
        if tool == "write_file":
            (repo / "g.txt").write_text("g\n")
        payload = {"session_id": "gem-1", "transcript_path": str(chat), "cwd": str(repo),
                   "hook_event_name": "AfterTool", "timestamp": f"2026-12-02T00:00:0{n}Z",
                   "tool_name": tool, "tool_input": {"file_path": str(repo / "g.txt")},
                   "tool_response": {"llmContent": "ok"}}
        done = run_cli("snapshot-hook", input=json.dumps(payload))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    (repo / "g.txt").write_text("changed later\n")
    [entry] = [e for e in run_cli_json("log", str(repo)) if e["kind"] == "checkpoint"]
    assert [(b["seq"], b["call"], b["tool_name"]) for b in entry["boundaries"]] == [
        (1, None, "write_file"), (2, None, "read_file")]
    refused = run_cli("rewind", "gem-1", "--seq", "2")
    assert refused.returncode == 17
    assert refused.stderr.startswith("durability: conversation-unsupported: gemini: ")
    assert "no header of the shape tested" in refused.stderr
    assert (repo / "g.txt").read_text() == "changed later\n"
    done = run_cli_json("rewind", "gem-1", "--seq", "2", "--code-only")
    assert done["boundary"]["harness"] == "gemini" and done["code"]["written"] == 1
    assert (repo / "g.txt").read_text() == "g\n"


def test_a_gemini_rewind_names_its_calls_from_the_chat_and_cuts_it(tmp_path: Path) -> None:
    from tests.transcripts import gemini_chat

    repo = make_git_repo(tmp_path / "repo")
    chats = tmp_path / "chats"
    chats.mkdir()
    chat = gemini_chat(chats / "session-2026-12-02T00-00-bbbbbbbb.jsonl", "bbbbbbbb-1",
                       [("c1", "write_file"), ("c2", "read_file"), ("c3", "run_shell_command")])
    for n, tool in enumerate(["write_file", "read_file", "run_shell_command"]):
        if tool == "write_file":
            (repo / "g.txt").write_text("g\n")
        if tool == "run_shell_command":
            (repo / "g.txt").unlink()
        payload = {"session_id": "gem-2", "transcript_path": str(chat), "cwd": str(repo),
                   "hook_event_name": "AfterTool", "timestamp": f"2026-12-02T00:00:0{n}Z",
                   "tool_name": tool, "tool_input": {"n": n}, "tool_response": {}}
        done = run_cli("snapshot-hook", input=json.dumps(payload))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    done = run_cli_json("rewind", "gem-2", "--seq", "2")
    assert (repo / "g.txt").read_text() == "g\n"
    conv = done["conversation"]
    assert (conv["harness"], conv["call_id"]) == ("gemini", "read_file__c2")
    assert conv["resume"] == ["gemini", "--resume", conv["session_id"]]
    _, patch = [json.loads(x) for x in Path(conv["path"]).read_text().splitlines()]
    assert patch["$set"]["messages"][-1]["id"] == "u1"
    # The boundaries now carry the chat's call ids: --call finds them.
    calls = [b["call"] for e in run_cli_json("log", str(repo)) if e["kind"] == "checkpoint"
             for b in e["boundaries"]]
    assert sorted(calls) == ["read_file__c2", "run_shell_command__c3", "write_file__c1"]
    again = run_cli_json("rewind", "gem-2", "--call", "write_file__c1", "--dry-run")
    assert again["boundary"]["seq"] == 1
