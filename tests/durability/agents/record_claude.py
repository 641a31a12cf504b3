"""Record the real Claude Code's stream-json output into test fixtures.

    PATH=$PWD/.venv/bin:$PATH .venv/bin/python -m tests.durability.agents.record_claude

Runs the pinned CLI (.venv/claude-code, 2.1.197) through the adapter's own
argv, env and prepare (``durability.agents.claude.ClaudeCode``) against the
loopback stand-in (tests/e2e/fake_anthropic.py), once per scenario below,
in a throwaway HOME and git folder, offline.  Each scenario writes
``fixtures/claude/NAME.jsonl`` (stdout, one event a line, the temporary
folder's path replaced by ``/TMP``) and ``NAME.meta.json`` (exit status,
stderr's head, the argv without the prompt).  The unit tests
(test_claude.py) parse these files; rerun this after a CLI upgrade and read
the diff.  What only a real subscription shows (``rate_limit_event``, the
``You've hit your ... limit`` notice) is not recorded here: those fixtures
are written by hand from the documented shapes (fixtures/claude/README.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from durability.agents.claude import ClaudeCode
from durability.agents.protocol import AgentRequest
from tests.e2e.fake_anthropic import Failure, FakeAnthropic, Script, usage_limit

ROOT = Path(__file__).resolve().parents[3]
CLAUDE = ROOT / ".venv" / "claude-code" / "node_modules" / ".bin" / "claude"
FIXTURES = Path(__file__).parent / "fixtures" / "claude"
SESSION = "6b0e8c1e-6a43-4c8e-9d0e-6f3a2b1c0d01"
UNKNOWN = "00000000-0000-4000-8000-000000000000"
# The usage limit's reset, fixed so the recorded message is the same on every
# recording: 06:20 in Berlin on 2026-12-02.
RESET = datetime(2026, 12, 2, 5, 20, tzinfo=UTC).timestamp()
USAGE = {"input_tokens": 1200, "output_tokens": 80, "cache_read_input_tokens": 3000,
         "cache_creation_input_tokens": 500}


def two_calls(repo: Path) -> Callable[[list[dict[str, Any]]], tuple[str, dict[str, Any]] | None]:
    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        if not results:
            return "Write", {"file_path": str(repo / "a.txt"), "content": "one\n"}
        if len(results) == 1:
            return "Bash", {"command": "cat a.txt && echo two > b.txt", "description": "step"}
        return None
    return plan


@dataclass
class Scenario:
    name: str
    script: Callable[[Path], Script]
    request: Callable[[Path, Path], AgentRequest]
    env: dict[str, str] = field(default_factory=dict)
    #: Run first, in the same folder and HOME (a session to resume).
    before: str | None = None
    #: Keep the session's transcript too (``NAME.transcript.jsonl``).
    transcript: bool = False
    #: The adapter's own options (``ClaudeCode(**adapter)``).
    adapter: dict[str, Any] = field(default_factory=dict)


def _request(repo: Path, private: Path, **kw: Any) -> AgentRequest:
    prompt = kw.pop("prompt", "Write one into a.txt, then two into b.txt.")
    return AgentRequest(prompt=prompt, worktree=repo, private_dir=private, **kw)


SCENARIOS = [
    Scenario("two_calls", lambda r: Script(plan=two_calls(r), final_text="Both written.",
                                           usage=USAGE),
             lambda r, p: _request(r, p, session_id=SESSION, model="claude-sonnet-4-5"),
             transcript=True),
    Scenario("two_calls_plain",
             lambda r: Script(plan=two_calls(r), final_text="Both written.", usage=USAGE),
             lambda r, p: _request(r, p, session_id=SESSION, model="claude-sonnet-4-5"),
             adapter={"partial_messages": False}),
    Scenario("two_blocks", lambda r: Script(say="Writing the file now.", usage=USAGE),
             lambda r, p: _request(r, p, model="claude-haiku-4-5")),
    Scenario("resumed", lambda r: Script(plan=two_calls(r), final_text="Carried on.", usage=USAGE),
             lambda r, p: _request(r, p, resume_id=SESSION, prompt="Continue where you left off."),
             before="two_calls"),
    Scenario("resume_unknown", lambda r: Script(),
             lambda r, p: _request(r, p, resume_id=UNKNOWN, prompt="Continue.")),
    Scenario("max_turns", lambda r: Script(plan=two_calls(r)),
             lambda r, p: _request(r, p, max_turns=1)),
    Scenario("structured", lambda r: Script(structured={"answer": 42, "files": ["a.txt"]}),
             lambda r, p: _request(r, p, output_schema={
                 "type": "object", "properties": {"answer": {"type": "integer"},
                                                  "files": {"type": "array"}},
                 "required": ["answer"]})),
    Scenario("rate_limited", lambda r: Script(fail_always=Failure(429, retry_after_s=0)),
             lambda r, p: _request(r, p), env={"CLAUDE_CODE_MAX_RETRIES": "1"}),
    Scenario("overloaded_then_ok",
             lambda r: Script(failures=[Failure(529, retry_after_s=0)]),
             lambda r, p: _request(r, p), env={"CLAUDE_CODE_MAX_RETRIES": "2"}),
    Scenario("usage_limit",
             lambda r: Script(fail_always=usage_limit(RESET, "Europe/Berlin")),
             lambda r, p: _request(r, p), env={"CLAUDE_CODE_MAX_RETRIES": "0"}),
    Scenario("long_prompt", lambda r: Script(final_text="Read it all."),
             lambda r, p: _request(r, p, prompt="Say done. " + "x" * (110 * 1024))),
]


def base_env(home: Path, base_url: str) -> dict[str, str]:
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
            "TMPDIR": str(home), "ANTHROPIC_BASE_URL": base_url,
            "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy", "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "NO_PROXY": "127.0.0.1,localhost",
            # An enclosing Claude Code's marks, which the adapter must drop.
            "CLAUDECODE": "1", "CLAUDE_CODE_ENTRYPOINT": "cli"}


def run(scenario: Scenario, tmp: Path) -> tuple[list[str], dict[str, Any]]:
    repo, private, home = tmp / "repo", tmp / "private", tmp / "home"
    for folder in (repo, home):
        folder.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    adapter = ClaudeCode(**scenario.adapter)
    request = scenario.request(repo, private)
    with FakeAnthropic(scenario.script(repo), id_base=0) as fake:
        adapter.prepare(request)
        env = adapter.env(request, base_env(home, fake.base_url) | scenario.env)
        argv = adapter.argv(request, str(CLAUDE))
        done = subprocess.run(argv, cwd=repo, env=env, input=adapter.stdin(request),
                              capture_output=True, timeout=180)
    text = done.stdout.decode("utf-8", "replace").replace(str(tmp), "/TMP")
    lines = [line for line in text.splitlines() if line.strip()]
    shown = [a.replace(str(tmp), "/TMP") for a in argv[1:]]
    if shown and shown[-2:-1] == ["--"]:
        shown[-1] = "<prompt>"
    if scenario.transcript:
        found = adapter.transcript(SESSION, repo, env)
        assert found is not None, "no transcript"
        (FIXTURES / f"{scenario.name}.transcript.jsonl").write_text(
            found.read_text().replace(str(tmp), "/TMP"))
    meta = {"returncode": done.returncode, "argv": ["claude", *shown],
            "stderr_head": done.stderr.decode("utf-8", "replace")[:2000].replace(str(tmp), "/TMP"),
            "env": scenario.env, "stand_in_failures": fake.failed}
    return lines, meta


def main(names: list[str]) -> int:
    if not os.access(CLAUDE, os.X_OK):
        print(f"no Claude Code at {CLAUDE}: run make setup", file=sys.stderr)
        return 1
    FIXTURES.mkdir(parents=True, exist_ok=True)
    by_name = {s.name: s for s in SCENARIOS}
    for scenario in [by_name[n] for n in names] if names else SCENARIOS:
        with tempfile.TemporaryDirectory(prefix="record-claude-") as tmp:
            if scenario.before:
                run(by_name[scenario.before], Path(tmp))
            lines, meta = run(scenario, Path(tmp))
        (FIXTURES / f"{scenario.name}.jsonl").write_text("\n".join(lines) + "\n")
        (FIXTURES / f"{scenario.name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
        print(f"{scenario.name}: exit {meta['returncode']}, {len(lines)} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
