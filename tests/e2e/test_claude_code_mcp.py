"""End to end: the real Claude Code loads `durability mcp` from the project's
.mcp.json and the (scripted) model uses it to list, restore and undo.

`durability install-hook --scope project --mcp project` is run as docs/how-to/mcp.md
says; the project server is approved as Claude Code's own dialog records a
"yes" (``enabledMcpjsonServers`` in the project's .claude/settings.local.json;
Claude Code 2.1.197 also approves project servers by itself under ``-p``, but
an interactive session needs that answer).  The stand-in model then:

1. writes a.txt and b.txt with the Write tool (the hook checkpoints each);
2. calls ``mcp__durability__snapshots``: the result must list the checkpoint
   of the first Write;
3. restores that checkpoint with ``dry_run`` (b.txt would be deleted, nothing
   changes), then for real (b.txt is gone), then calls the answer's ``undo``
   (b.txt is back).

Each next call is decided from the tool results Claude Code sent back, and
the disk is looked at at the moment the model is asked again, i.e. after the
previous call finished.  Run in a jj repository and in a plain git one.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.fake_anthropic import FakeAnthropic, Script
from tests.e2e.test_claude_code import CLAUDE_TIMEOUT_S, claude_env, claude_exe
from tests.helpers import cli_json, make_git_repo, make_jj_repo

pytestmark = pytest.mark.slow

# Claude Code connects MCP servers in the background by default, so under
# load the first turn may go out before the server answers and offer none of
# its tools; "0" makes it wait for them (as a `claude -p` script should).
MCP_ENV = {"MCP_CONNECTION_NONBLOCKING": "0"}
FINAL = "Done: restored and undone."
SNAPSHOTS = "mcp__durability__snapshots"
RESTORE = "mcp__durability__restore"


def text_of(block: dict[str, Any]) -> str:
    """A tool_result's text (Claude Code sends a string or text blocks)."""
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or []
                   if isinstance(part, dict) and part.get("type") == "text")


def answer(block: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(text_of(block))
    return found


class Agent:
    """The scripted model: its plan, and what it saw on disk at each step."""

    def __init__(self, repo: Path, other: Path) -> None:
        self.repo, self.other = repo, other
        self.b_on_disk: dict[int, bool] = {}
        self.failed: list[str] = []

    def plan(self, results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        # A plan that cannot go on ends the session (said in the test's
        # failure) rather than failing the request, which Claude Code retries.
        try:
            return self._next(results)
        except Exception as exc:
            self.failed.append(f"{exc!r} after {[text_of(b)[:300] for b in results]}")
            return None

    def _next(self, results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        step = len(results)
        self.b_on_disk[step] = (self.repo / "b.txt").exists()
        if step == 0:
            return "Write", {"file_path": str(self.repo / "a.txt"), "content": "one\n"}
        if step == 1:
            return "Write", {"file_path": str(self.repo / "b.txt"), "content": "two\n"}
        if step == 2:
            return SNAPSHOTS, {}
        if step in (3, 4):
            return RESTORE, {"seq": self.first_write_seq(results), "dry_run": step == 3}
        if step == 5:
            return RESTORE, answer(results[4])["undo"]["arguments"]
        if step == 6:
            return SNAPSHOTS, {"worktree": str(self.other)}
        return None

    @staticmethod
    def first_write_seq(results: list[dict[str, Any]]) -> int:
        listed = answer(results[2])["checkpoints"]
        found = [c["seq"] for c in listed if c["tool_use_id"] == results[0]["tool_use_id"]]
        assert len(found) == 1, listed
        seq: int = found[0]
        return seq


def project(repo: Path) -> Path:
    """The repository with the hook and the MCP server installed as the docs
    say, and the project server approved as Claude Code's dialog does."""
    done = cli_json("install-hook", "--scope", "project", "--project-dir", str(repo),
                    "--mcp", "project")
    assert done["installed"] is True and done["mcp"]["installed"] is True, done
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["durability"]["args"] == \
        ["mcp"]
    local = repo / ".claude" / "settings.local.json"
    local.write_text(json.dumps({"enabledMcpjsonServers": ["durability"]}))
    return repo


def run(repo: Path, agent: Agent) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """`claude -p` in ``repo``; its JSON result and the tool results it sent
    back (one per call, in order)."""
    with FakeAnthropic(Script(plan=agent.plan, final_text=FINAL)) as fake:
        done = subprocess.run(
            [claude_exe(), "-p", "Write two files, then restore the first checkpoint and undo.",
             "--output-format", "json", "--permission-mode", "bypassPermissions"],
            cwd=repo, env=claude_env(fake.base_url) | MCP_ENV, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=CLAUDE_TIMEOUT_S)
        results = {b["tool_use_id"]: b for b in fake.tool_results()}
        offered = {t.get("name") for r in fake.messages() for t in r.body.get("tools") or []}
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert SNAPSHOTS in offered and RESTORE in offered, sorted(n for n in offered if n)
    result: dict[str, Any] = json.loads(done.stdout)
    assert result.get("result") == FINAL, result
    return result, sorted(results.values(), key=lambda b: str(b["tool_use_id"]))


@pytest.mark.parametrize("kind", ["jj", "git"])
def test_claude_code_restores_and_undoes_through_the_mcp_server(tmp_path: Path,
                                                                 kind: str) -> None:
    made = make_jj_repo(tmp_path / "repo") if kind == "jj" else make_git_repo(tmp_path / "repo")
    repo = project(made.resolve())
    other = make_git_repo(tmp_path / "other").resolve()
    agent = Agent(repo, other)
    result, results = run(repo, agent)
    assert agent.failed == []

    assert len(results) == 7, [text_of(b)[:200] for b in results]
    bad = [text_of(b) for b in results if b.get("is_error")]
    assert len(bad) == 1 and "durability: invalid-value: " in bad[0], bad
    write_a, write_b, listed, dry, real, undo, refused = results
    assert refused.get("is_error") and str(other) in text_of(refused)
    # The snapshots tool listed the hook's checkpoints of both Writes.
    checkpoints = answer(listed)["checkpoints"]
    assert answer(listed)["run_id"] == result["session_id"]
    by_call = {c["tool_use_id"]: c for c in checkpoints}
    assert write_a["tool_use_id"] in by_call and write_b["tool_use_id"] in by_call, checkpoints
    first = by_call[write_a["tool_use_id"]]
    assert first["harness"] == "claude" and first["worktree"] == str(repo)
    # The dry run said what the restore would do and changed nothing ...
    assert answer(dry)["dry_run"] is True
    assert (answer(dry)["deleted"], answer(dry)["written"]) == (["b.txt"], [])
    assert answer(dry)["undo"] is None and answer(dry)["target"]["seq"] == first["seq"]
    assert agent.b_on_disk[4] is True
    # ... the restore deleted b.txt, after taking its pre-restore checkpoint ...
    restored = answer(real)
    assert (restored["dry_run"], restored["deleted"]) == (False, ["b.txt"])
    assert restored["pre_restore"]["seq"] == restored["undo"]["arguments"]["seq"]
    assert agent.b_on_disk[5] is False
    assert (repo / "a.txt").read_text() == "one\n"
    # ... and its undo put b.txt back.
    assert answer(undo)["written"] == ["b.txt"]
    assert agent.b_on_disk[6] is True
    assert (repo / "b.txt").read_text() == "two\n"
    # The store agrees.  The pre-restore checkpoints deduplicate against the
    # hook's (the tree had not changed since), and the hook checkpointed what
    # the restore and its undo did (the dry run changed nothing: no row).
    rows = cli_json("snapshots", result["session_id"])
    assert [(r["source"], r["label"]) for r in rows] == [
        ("hook", "Write a.txt"), ("hook", "Write b.txt"), ("hook", RESTORE), ("hook", RESTORE)]
    assert restored["pre_restore"]["seq"] == by_call[write_b["tool_use_id"]]["seq"]
