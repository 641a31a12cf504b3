"""A rewind's new session under a crash and a failed write: a process
killed while writing it leaves no half a session a harness would list, and
a write that fails refuses before the tree is touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import hook_payload, make_git_repo, run_cli, run_cli_json
from tests.transcripts import gemini_chat, rollout, transcript

SESSION = "9d7c1c4e-0000-4000-8000-000000000002"

# The child cuts the transcript, then writes the copy with the file size
# limited to 64 bytes: the kernel kills it (SIGXFSZ) in the middle of the write.
_CHILD = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it by default
from pathlib import Path
kind, source = sys.argv[1], sys.argv[2]
if kind == "claude":
    from durability.agents.transcripts import claude as t
    c = t.cut(source, "t2")
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
    t.write_session(c, "11111111-2222-4333-8444-555555555555")
elif kind == "codex":
    from durability.agents.transcripts import codex as t
    c = t.cut(source, "c2")
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
    t.write_session(c, t.new_thread_id())
else:
    from durability.agents.transcripts import gemini as t
    c = t.cut(source, "read_file__c2")
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
    t.write_session(c)
"""


def _killed_mid_write(kind: str, source: Path) -> None:
    done = subprocess.run([sys.executable, "-c", _CHILD, kind, str(source)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == -25, (done.returncode, done.stderr)  # SIGXFSZ


def test_a_claude_session_killed_mid_write_leaves_no_jsonl(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "p"
    folder.mkdir(parents=True)
    source = transcript(folder / f"{SESSION}.jsonl", SESSION,
                        [("t1", "Write"), ("t2", "Read"), ("t3", "Bash")])
    original = source.read_bytes()
    _killed_mid_write("claude", source)
    assert [p.name for p in folder.iterdir() if p.suffix == ".jsonl"] == [source.name]
    assert source.read_bytes() == original


def test_a_codex_rollout_killed_mid_write_leaves_no_rollout(tmp_path: Path) -> None:
    day = tmp_path / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    source = rollout(day / "rollout-2026-12-02T00-00-00-t.jsonl", "0190-t",
                     [("c1", "shell"), ("c2", "shell"), ("c3", "shell")])
    _killed_mid_write("codex", source)
    assert [p.name for p in day.iterdir() if p.suffix == ".jsonl"] == [source.name]


def test_a_gemini_chat_killed_mid_write_leaves_no_session(tmp_path: Path) -> None:
    chats = tmp_path / "chats"
    chats.mkdir()
    source = gemini_chat(chats / "session-2026-12-02T00-00-bbbbbbbb.jsonl", "bbbbbbbb-1",
                         [("c1", "write_file"), ("c2", "read_file"), ("c3", "write_file")])
    _killed_mid_write("gemini", source)
    assert [p.name for p in chats.iterdir() if p.suffix == ".jsonl"] == [source.name]


def test_a_new_session_that_cannot_be_written_refuses_before_the_tree_changes(
        tmp_path: Path) -> None:
    """The transcript's folder is so deep that the source (``s.jsonl``) can
    be read but a new session's longer name is over PATH_MAX: the write
    fails, and the files must still be as they were."""
    repo = make_git_repo(tmp_path / "repo")
    deep = tmp_path
    while len(str(deep)) < 4096 - 300:
        deep = deep / ("d" * 200)
    folder = deep / "projects"
    folder = folder / ("p" * (4096 - 40 - len(str(folder)) - 1))
    os.makedirs(folder, exist_ok=True)
    source = transcript(folder / "s.jsonl", SESSION, [("t1", "Write"), ("t2", "Bash")],
                        cwd=str(repo))
    assert len(str(source)) <= 4096 - 2
    for call, tool, act in [("t1", "Write", lambda: (repo / "a.txt").write_text("a\n")),
                            ("t2", "Bash", lambda: (repo / "a.txt").write_text("b\n"))]:
        act()
        payload = hook_payload(repo, session_id=SESSION, tool_use_id=call, tool_name=tool,
                               transcript_path=str(source))
        done = run_cli("snapshot-hook", input=json.dumps(payload))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    refused = run_cli("rewind", SESSION, "--call", "t1")
    assert refused.returncode != 0 and refused.stderr.startswith("durability: "), refused.stderr
    assert "cannot write the new session" in refused.stderr
    assert (repo / "a.txt").read_text() == "b\n"
    assert [p.name for p in folder.iterdir()] == ["s.jsonl"]


def test_a_transcript_outside_the_harness_session_folders_gets_no_new_session(
        tmp_path: Path) -> None:
    """The transcript path comes from the hook's payload (anything that runs
    ``snapshot-hook`` names it): a rewind writes a new session only beside a
    transcript where the harness keeps them (``projects/<folder>/`` for
    Claude Code), and refuses before anything changes otherwise."""
    repo = make_git_repo(tmp_path / "repo")
    elsewhere = tmp_path / "home" / ".ssh"
    elsewhere.mkdir(parents=True)
    source = transcript(elsewhere / "s.jsonl", SESSION, [("t1", "Write"), ("t2", "Bash")],
                        cwd=str(repo))
    for call, tool, act in [("t1", "Write", lambda: (repo / "a.txt").write_text("a\n")),
                            ("t2", "Bash", lambda: (repo / "a.txt").write_text("b\n"))]:
        act()
        payload = hook_payload(repo, session_id=SESSION, tool_use_id=call, tool_name=tool,
                               transcript_path=str(source))
        done = run_cli("snapshot-hook", input=json.dumps(payload))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    refused = run_cli("rewind", SESSION, "--call", "t1")
    assert refused.returncode == 17, refused.stderr
    assert refused.stderr.startswith("durability: conversation-unsupported: claude: ")
    assert "not in a Claude Code projects folder" in refused.stderr
    assert (repo / "a.txt").read_text() == "b\n"
    assert [p.name for p in elsewhere.iterdir()] == ["s.jsonl"]
    code = run_cli("rewind", SESSION, "--call", "t1", "--code-only")
    assert code.returncode == 0, code.stderr
    assert (repo / "a.txt").read_text() == "a\n"


def test_a_gemini_dry_run_names_the_calls_without_recording_them(tmp_path: Path) -> None:
    """``--dry-run`` changes nothing, the state database included: the
    call ids it reads from the chat are used, not written to the boundaries."""
    repo = make_git_repo(tmp_path / "repo")
    chats = tmp_path / "chats"
    chats.mkdir()
    chat = gemini_chat(chats / "session-2026-12-02T00-00-cccccccc.jsonl", "cccccccc-1",
                       [("c1", "write_file"), ("c2", "read_file")])
    for n, tool in enumerate(["write_file", "read_file"]):
        if tool == "write_file":
            (repo / "g.txt").write_text("g\n")
        payload = {"session_id": "gem-3", "transcript_path": str(chat), "cwd": str(repo),
                   "hook_event_name": "AfterTool", "timestamp": f"2026-12-02T00:00:0{n}Z",
                   "tool_name": tool, "tool_input": {"n": n}, "tool_response": {}}
        done = run_cli("snapshot-hook", input=json.dumps(payload))
        assert (done.returncode, done.stdout) == (0, ""), done.stderr
    seen = run_cli_json("rewind", "gem-3", "--call", "read_file__c2", "--dry-run")
    assert (seen["dry_run"], seen["boundary"]["seq"]) == (True, 2)
    assert seen["conversation"]["call_id"] == "read_file__c2"
    calls = [b["call"] for e in run_cli_json("log", str(repo)) if e["kind"] == "checkpoint"
             for b in e["boundaries"]]
    assert calls == [None, None]
