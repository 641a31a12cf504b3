"""Rewind, end to end with the real Claude Code CLI (issue 24).

A scripted session in a real jj repository, our hook installed: Write, Edit,
a Bash edit, a Read and a Bash ``rm -rf`` of a folder.  ``rewind --call`` of
the Bash edit puts the tree back to that boundary's checkpoint and writes a
new session; ``claude -p "go on" --resume NEW`` then sends the stand-in a
conversation whose last tool result is the Bash edit's (nothing after it),
while ``--resume`` of the original still sends the whole conversation.  A
rewind to the Read's boundary (the tree unchanged by it) works too, and the
undo each prints puts the tree back byte for byte.

A missing CLI fails the test (run `make setup`); it never skips.  The
pinned CLI always runs; another version runs too when
``DURABILITY_E2E_CLAUDE_EXTRA`` names its binary (2.1.332 was run so:
``npm install --prefix DIR @anthropic-ai/claude-code@2.1.332``), since its
transcript format differs (docs/how-to/rewind.md).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.store import Store
from durability.store.boundaries import boundaries
from tests.e2e.fake_anthropic import FakeAnthropic, Script, results_in
from tests.e2e.test_claude_code import CLAUDE_TIMEOUT_S, claude_env, claude_exe
from tests.helpers import cli, cli_json, commit_manifest, jj, make_jj_repo, tree_manifest

pytestmark = pytest.mark.slow

#: Another Claude Code binary to run the test with (its version is in the id).
EXTRA = os.environ.get("DURABILITY_E2E_CLAUDE_EXTRA")


def _exe(which: str) -> str:
    if which == "pinned":
        return claude_exe()
    assert EXTRA and os.access(EXTRA, os.X_OK), f"{EXTRA} is not an executable"
    return EXTRA


def _repo(path: Path) -> Path:
    repo = make_jj_repo(path).resolve()
    (repo / "README.md").write_text("hello\n")
    (repo / "olddir").mkdir()
    (repo / "olddir" / "x.txt").write_text("x\n")
    jj(repo, "commit", "-m", "init")
    return repo


def _calls(repo: Path) -> list[tuple[str, dict[str, Any]]]:
    app = str(repo / "app.py")
    return [("Write", {"file_path": app, "content": "print('hi')\n"}),
            ("Edit", {"file_path": app, "old_string": "hi", "new_string": "hello"}),
            ("Bash", {"command": "sed -i 's/hello/bonjour/' app.py", "description": "edit"}),
            ("Read", {"file_path": app}),
            ("Bash", {"command": "rm -rf olddir", "description": "remove"})]


def _claude(exe: str, repo: Path, fake: FakeAnthropic, *args: str) -> dict[str, Any]:
    ran = subprocess.run(
        [exe, *args, "--output-format", "json", "--permission-mode",
         "bypassPermissions"],
        cwd=repo, env=claude_env(fake.base_url), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=CLAUDE_TIMEOUT_S)
    assert ran.returncode == 0, (ran.stdout[-2000:], ran.stderr[-2000:])
    answer: dict[str, Any] = json.loads(ran.stdout)
    return answer


def _last_conversation(fake: FakeAnthropic) -> dict[str, Any]:
    """The newest request that carried the agent's conversation (it offers tools)."""
    return [r.body for r in fake.messages() if r.body.get("tools")][-1]


def _tool_uses(body: dict[str, Any]) -> list[str]:
    return [str(b["id"]) for m in body.get("messages") or [] if m.get("role") == "assistant"
            and isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]


@pytest.mark.parametrize("which", ["pinned"] + (["extra"] if EXTRA else []))
def test_rewind_to_a_bash_edit_gives_back_its_tree_and_a_conversation_ending_there(
        tmp_path: Path, which: str) -> None:
    exe = _exe(which)
    repo = _repo(tmp_path / "repo")
    assert cli_json("install-hook", "--scope", "project", "--project-dir", str(repo))["installed"]
    calls = _calls(repo)

    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        done = len({r["tool_use_id"] for r in results})
        return calls[done] if done < len(calls) else None

    with FakeAnthropic(Script(plan=plan, final_text="done")) as fake:
        session = str(_claude(exe, repo, fake, "-p", "Edit the project.")["session_id"])
        original = _last_conversation(fake)
    ids = _tool_uses(original)
    assert len(ids) == 5, ids
    write_id, edit_id, bash_edit_id, read_id, rm_id = ids
    assert not (repo / "olddir").exists()

    with Store(Settings.from_env().database) as store:
        rows = boundaries(store, session)
    # Five calls, five boundaries; the Read changed nothing: its boundary
    # names the Bash edit's checkpoint.
    assert [(b.tool_use_id, b.tool_name) for b in rows] == [
        (write_id, "Write"), (edit_id, "Edit"), (bash_edit_id, "Bash"), (read_id, "Read"),
        (rm_id, "Bash")]
    bash_edit, read = rows[2], rows[3]
    assert (read.checkpoint_seq, read.commit_id) == (bash_edit.checkpoint_seq,
                                                    bash_edit.commit_id)
    transcript = Path(str(bash_edit.transcript_path))
    original_bytes = transcript.read_bytes()

    # The dry run lists the files and the turns it would drop, and changes nothing.
    before = tree_manifest(repo)
    seen = cli_json("rewind", session, "--call", bash_edit_id, "--dry-run")
    assert seen["dry_run"] and seen["conversation"]["session_id"] is None
    assert [w["path"] for w in seen["code"]["write"]] == ["olddir/x.txt"]
    assert [(t["kind"], t["tool_use_id"]) for t in seen["conversation"]["dropped"]
            if t["kind"] != "text"] == [("tool_use", read_id), ("tool_result", read_id),
                                        ("tool_use", rm_id), ("tool_result", rm_id)]
    assert tree_manifest(repo) == before

    done = cli_json("rewind", session, "--call", bash_edit_id)
    assert tree_manifest(repo) == commit_manifest(repo, bash_edit.commit_id)
    assert (repo / "olddir" / "x.txt").read_bytes() == b"x\n"
    assert (repo / "app.py").read_bytes() == b"print('bonjour')\n"
    new = done["conversation"]["session_id"]
    assert done["conversation"]["resume"] == ["claude", "--resume", new]
    assert transcript.read_bytes() == original_bytes  # the original is never changed

    def finish(results: list[dict[str, Any]]) -> None:
        return None

    with FakeAnthropic(Script(plan=finish, final_text="continued")) as fake:
        resumed = _claude(exe, repo, fake, "-p", "go on", "--resume", new)
        assert resumed["session_id"] == new
        body = _last_conversation(fake)
        assert _tool_uses(body) == [write_id, edit_id, bash_edit_id]
        assert [r["tool_use_id"] for r in results_in(body)] == [write_id, edit_id, bash_edit_id]
        # The original resumes as it was: the whole conversation.
        _claude(exe, repo, fake, "-p", "go on", "--resume", session)
        assert _tool_uses(_last_conversation(fake)) == ids
        assert [r["tool_use_id"] for r in results_in(_last_conversation(fake))] == ids

    # Undo: the pre-restore checkpoint it printed, byte for byte.
    pre = done["code"]["pre_restore"]
    undo = cli("restore", pre["run_id"], "--node", pre["node_id"], "--iteration",
               str(pre["iteration"]), "--attempt", str(pre["attempt"]), "--seq", str(pre["seq"]))
    assert undo.returncode == 0, undo.stderr
    assert tree_manifest(repo) == before

    # The Read's boundary: the tree its (unchanged) checkpoint holds, and a
    # conversation ending with the Read's result.
    at_read = cli_json("rewind", session, "--seq", str(read.seq))
    assert tree_manifest(repo) == commit_manifest(repo, read.commit_id)
    kept = [json.loads(line) for line in
            Path(at_read["conversation"]["path"]).read_text().splitlines()]
    last = [b for b in kept[-1]["message"]["content"] if b.get("type") == "tool_result"]
    assert [b["tool_use_id"] for b in last] == [read_id]
    assert {k["sessionId"] for k in kept if "sessionId" in k} == {
        at_read["conversation"]["session_id"]}
    pre = at_read["code"]["pre_restore"]
    undo = cli("restore", pre["run_id"], "--node", pre["node_id"], "--iteration",
               str(pre["iteration"]), "--attempt", str(pre["attempt"]), "--seq", str(pre["seq"]))
    assert undo.returncode == 0, undo.stderr
    assert tree_manifest(repo) == before
