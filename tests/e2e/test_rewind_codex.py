"""Rewind a Codex session, end to end with the real pinned Codex CLI (0.171.0)
driven through its adapter against the Responses API stand-in (issue 24).

A session of an apply_patch, a shell edit, a read (``cat``) and an ``rm -r``
of a folder (Codex refuses ``rm -rf``), our hook given for the process;
``rewind --call`` of the shell edit puts the tree back to that boundary's
checkpoint and writes a new thread; resuming it sends the stand-in a history
whose last tool output is the shell edit's, while the original thread still
resumes whole, and the undo puts the tree back byte for byte.

A missing CLI fails the test (run `make .venv/agent-clis-ready`); it never skips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from durability.agents.codex import CodexHarness
from durability.agents.protocol import AgentRequest
from durability.config import Settings
from durability.store import Store
from durability.store.boundaries import boundaries
from tests.e2e import fake_openai
from tests.e2e.agent_driver import CODEX, Invocation, base_env, cli_path, run, toolkit_env
from tests.e2e.fake_openai import FakeOpenAI, Script, add_file_patch
from tests.helpers import (
    cli,
    cli_json,
    commit_manifest,
    durability_exe,
    git,
    make_git_repo,
    tree_manifest,
)

pytestmark = pytest.mark.slow


def _invoke(repo: Path, tmp_path: Path, env: dict[str, str], prompt: str, tag: str,
            resume_id: str | None = None) -> Invocation:
    request = AgentRequest(prompt=prompt, worktree=repo, private_dir=tmp_path / f"private-{tag}",
                           hook_command=(durability_exe(), "snapshot-hook"),
                           hook_env=toolkit_env(), resume_id=resume_id)
    return run(CodexHarness(), request, cli_path(CODEX), env)


def test_rewind_a_codex_session_to_a_shell_edit(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    (repo / "olddir").mkdir()
    (repo / "olddir" / "x.txt").write_text("x\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "olddir")
    steps: list[tuple[str, dict[str, Any] | str]] = [
        ("apply_patch", add_file_patch("notes.md", "one\ntwo")),
        ("exec_command", {"cmd": "sed -i 's/two/deux/' notes.md"}),
        ("exec_command", {"cmd": "cat notes.md"}),
        # Codex refuses `rm -rf` ("rm -f style commands are not permitted").
        ("exec_command", {"cmd": "rm -r olddir"}),
    ]

    def plan(outputs: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | str] | None:
        return steps[len(outputs)] if len(outputs) < len(steps) else None

    with FakeOpenAI(Script(plan=plan)) as fake:
        home = tmp_path / "user-home"
        fake_openai.codex_config(home / ".codex", fake.base_url)
        env = base_env(home, CODEX_HOME=str(home / ".codex"),
                       **{fake_openai.API_KEY_ENV: "sk-e2e"})
        done = _invoke(repo, tmp_path, env, "Edit the notes.", "a")
        assert done.final.ok, done.stderr[-2000:]
        session = str(done.final.session_id)
        ids = [o["call_id"] for o in fake.tool_outputs()]
        assert len(ids) == 4, ids
        assert not (repo / "olddir").exists(), fake.tool_outputs()

        with Store(Settings.from_env().database) as store:
            rows = boundaries(store, session)
        assert [(b.tool_use_id, b.harness) for b in rows] == [(i, "codex") for i in ids]
        edit, read = rows[1], rows[2]
        assert read.commit_id == edit.commit_id  # the cat changed nothing
        rollout = Path(str(edit.transcript_path))
        original = rollout.read_bytes()

        before = tree_manifest(repo)
        rewound = cli_json("rewind", session, "--call", ids[1])
        assert tree_manifest(repo) == commit_manifest(repo, edit.commit_id)
        assert (repo / "notes.md").read_text() == "one\ndeux\n"
        assert (repo / "olddir" / "x.txt").read_text() == "x\n"
        conv = rewound["conversation"]
        assert conv["harness"] == "codex" and conv["versions"] == ["0.171.0"]
        new = conv["session_id"]
        assert conv["resume"] == ["codex", "resume", new]
        assert rollout.read_bytes() == original

        fake.script.plan = lambda outputs: None
        first = len(fake.responses())
        again = _invoke(repo, tmp_path, env, "Go on.", "b", resume_id=new)
        assert again.final.ok and again.final.session_id == new, again.stderr[-2000:]
        history = fake.responses()[first].body
        assert [c["call_id"] for c in fake_openai.calls_in(history)] == ids[:2]
        assert [o["call_id"] for o in fake_openai.outputs_in(history)] == ids[:2]
        assert fake_openai.user_texts(history)[-1] == "Go on."
        # The original thread resumes whole.
        first = len(fake.responses())
        whole = _invoke(repo, tmp_path, env, "Go on.", "c", resume_id=session)
        assert whole.final.ok, whole.stderr[-2000:]
        assert [o["call_id"] for o in fake_openai.outputs_in(
            fake.responses()[first].body)] == ids

    pre = rewound["code"]["pre_restore"]
    undo = cli("restore", pre["run_id"], "--node", pre["node_id"], "--iteration",
               str(pre["iteration"]), "--attempt", str(pre["attempt"]), "--seq", str(pre["seq"]))
    assert undo.returncode == 0, undo.stderr
    assert tree_manifest(repo) == before
