"""Rewind a Gemini CLI session, end to end with the real pinned Gemini CLI
(0.61.0) driven through its adapter against the Gemini API stand-in, in a
real jj repository (issue 24).

Gemini's hook payloads carry no call id, so the rewind names the shell
edit's boundary by seq; the tree goes back to that boundary's checkpoint, the
new session resumes with a history whose last function response is the
shell edit's, and the original still resumes whole.

A missing CLI fails the test (run `make .venv/agent-clis-ready`); it never skips.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from durability.agents.gemini import GeminiHarness
from durability.agents.protocol import AgentRequest
from durability.config import Settings
from durability.store import Store
from durability.store.boundaries import boundaries
from tests.e2e import fake_gemini
from tests.e2e.agent_driver import GEMINI, Invocation, base_env, cli_path, run, toolkit_env
from tests.e2e.fake_gemini import FakeGemini, Script
from tests.helpers import (
    cli,
    cli_json,
    commit_manifest,
    durability_exe,
    jj,
    make_jj_repo,
    tree_manifest,
)

pytestmark = pytest.mark.slow

USER_SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}}}


def _invoke(repo: Path, tmp_path: Path, env: dict[str, str], prompt: str, tag: str,
            resume_id: str | None = None) -> Invocation:
    request = AgentRequest(prompt=prompt, worktree=repo, private_dir=tmp_path / f"private-{tag}",
                           hook_command=(durability_exe(), "snapshot-hook"),
                           hook_env=toolkit_env(), resume_id=resume_id,
                           model=fake_gemini.MODEL)
    return run(GeminiHarness(), request, cli_path(GEMINI), env)


def _responded(fake: FakeGemini, first: int) -> list[str]:
    """The function response ids of the first agent turn from request ``first`` on."""
    body = fake.streams()[first].body
    ids: list[str] = []
    for r in fake_gemini.function_responses(body):  # Gemini sends some twice
        if str(r.get("id")) not in ids:
            ids.append(str(r.get("id")))
    return ids


def test_rewind_a_gemini_session_to_a_shell_edit(tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo").resolve()
    (repo / "olddir").mkdir()
    (repo / "olddir" / "x.txt").write_text("x\n")
    jj(repo, "commit", "-m", "olddir")
    notes = str(repo / "notes.md")
    steps: list[tuple[str, dict[str, Any]]] = [
        ("write_file", {"file_path": notes, "content": "one\ntwo\n"}),
        ("run_shell_command", {"command": "sed -i 's/two/deux/' notes.md",
                               "description": "edit"}),
        ("read_file", {"file_path": notes}),
        ("run_shell_command", {"command": "rm -rf olddir", "description": "remove"}),
    ]

    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        return steps[len(results)] if len(results) < len(steps) else None

    with FakeGemini(Script(plan=plan)) as fake:
        home = tmp_path / "user-home"
        (home / ".gemini").mkdir(parents=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(USER_SETTINGS))
        env = base_env(home, GEMINI_API_KEY=fake_gemini.API_KEY,
                       GOOGLE_GEMINI_BASE_URL=fake.base_url)
        done = _invoke(repo, tmp_path, env, "Edit the notes.", "a")
        assert done.final.ok, done.stderr[-2000:]
        session = str(done.final.session_id)
        ids = [str(r["id"]) for r in fake.tool_results()]
        assert len(ids) == 4, ids
        assert not (repo / "olddir").exists()

        with Store(Settings.from_env().database) as store:
            rows = boundaries(store, session)
        assert [(b.tool_use_id, b.tool_name) for b in rows] == [
            (None, name) for name, _ in steps], (fake.tool_results(), done.stderr[-3000:])
        edit, read = rows[1], rows[2]
        assert read.commit_id == edit.commit_id  # the read changed nothing
        chat = Path(str(edit.transcript_path))
        original = chat.read_bytes()

        before = tree_manifest(repo)
        rewound = cli_json("rewind", session, "--seq", str(edit.seq))
        assert tree_manifest(repo) == commit_manifest(repo, edit.commit_id)
        assert (repo / "notes.md").read_text() == "one\ndeux\n"
        conv = rewound["conversation"]
        assert conv["harness"] == "gemini" and conv["call_id"].endswith(ids[1])
        new = conv["session_id"]
        assert conv["resume"] == ["gemini", "--resume", new]
        assert chat.read_bytes() == original

        fake.script.plan = lambda results: None
        first = len(fake.streams())
        again = _invoke(repo, tmp_path, env, "Go on.", "b", resume_id=new)
        assert again.final.ok, again.stderr[-2000:]
        assert _responded(fake, first) == ids[:2]
        first = len(fake.streams())
        whole = _invoke(repo, tmp_path, env, "Go on.", "c", resume_id=session)
        assert whole.final.ok, whole.stderr[-2000:]
        assert _responded(fake, first) == ids

    pre = rewound["code"]["pre_restore"]
    undo = cli("restore", pre["run_id"], "--node", pre["node_id"], "--iteration",
               str(pre["iteration"]), "--attempt", str(pre["attempt"]), "--seq", str(pre["seq"]))
    assert undo.returncode == 0, undo.stderr
    assert tree_manifest(repo) == before
