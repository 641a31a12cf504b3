"""Record what the real Codex and Gemini CLIs print, for the adapters' unit
tests (tests/durability/agents/fixtures/*.json).

    PATH=.venv/bin:$PATH .venv/bin/python -m tests.durability.agents.record_streams

Each scenario runs the pinned CLI (scripts/install-agent-clis.sh) headless
through its adapter's argv against the loopback stand-ins in tests/e2e/, in
a throwaway folder, and keeps the stdout lines, the exit status and the head
of stderr.  Rerun it when a pin moves, and read the diff: the unit tests then
say what the new version changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from durability.agents.codex import CodexHarness
from durability.agents.gemini import GeminiHarness
from durability.agents.protocol import AgentRequest, Harness
from tests.e2e import fake_gemini, fake_openai
from tests.e2e.agent_driver import CODEX, GEMINI, base_env

FIXTURES = Path(__file__).parent / "fixtures"
#: A hook that does nothing: the scenarios record the stream, not checkpoints,
#: but the CLI must see a hook (Codex prints its trust-bypass notice).
NOOP_HOOK = ("/bin/true",)


def _version(exe: Path) -> str:
    env = {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir()}
    return subprocess.run([str(exe), "--version"], capture_output=True, text=True, env=env,
                          check=True).stdout.strip().splitlines()[-1]


def _invoke(adapter: Harness, exe: Path, request: AgentRequest,
            env: dict[str, str]) -> dict[str, Any]:
    argv = adapter.argv(request, str(exe))
    full_env = adapter.env(request, env)
    adapter.prepare(request)
    data = adapter.stdin(request)
    done = subprocess.run(argv, cwd=request.worktree, env=full_env, input=data,
                          capture_output=True, timeout=300)
    return {"argv": [Path(argv[0]).name, *argv[1:]], "returncode": done.returncode,
            "stderr_head": done.stderr.decode("utf-8", "replace")[:4000],
            "lines": done.stdout.decode("utf-8", "replace").splitlines()}


def _plan(steps: list[tuple[str, Any]]) -> Callable[[list[dict[str, Any]]], Any]:
    def plan(results: list[dict[str, Any]]) -> Any:
        return steps[len(results)] if len(results) < len(steps) else None
    return plan


def _request(root: Path, repo: Path, tag: str, **kw: Any) -> AgentRequest:
    return AgentRequest(prompt=kw.pop("prompt", "Do the task."), worktree=repo,
                        private_dir=root / f"private-{tag}", hook_command=NOOP_HOOK, **kw)


def record_codex(root: Path) -> dict[str, dict[str, Any]]:
    repo = root / "codex-repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = root / "codex-user"
    found: dict[str, dict[str, Any]] = {}
    steps = [("apply_patch", fake_openai.add_file_patch("notes.md", "one\ntwo")),
             ("exec_command", {"cmd": "echo hello > made-by-codex.txt"}),
             ("exec_command", {"cmd": "cat notes.md; exit 3"})]
    with fake_openai.FakeOpenAI(fake_openai.Script(plan=_plan(steps))) as fake:
        fake_openai.codex_config(home / ".codex", fake.base_url)
        env = base_env(home, CODEX_HOME=str(home / ".codex"),
                       **{fake_openai.API_KEY_ENV: "sk-record"})
        found["tools"] = _invoke(CodexHarness(), CODEX, _request(root, repo, "c1"), env)
        thread = json.loads(found["tools"]["lines"][0])["thread_id"]
        fake.script.plan = _plan([("exec_command", {"cmd": "echo two > two.txt"})] * 4)
        found["resumed"] = _invoke(CodexHarness(), CODEX,
                                   _request(root, repo, "c2", prompt="Go on.", resume_id=thread),
                                   env)
        rollout = next((home / ".codex" / "sessions").glob(f"*/*/*/rollout-*-{thread}.jsonl"))
        found["resumed"]["rollout_token_counts"] = [
            line for line in rollout.read_text().splitlines() if '"token_count"' in line]
        found["lost"] = _invoke(CodexHarness(), CODEX, _request(
            root, repo, "c3", resume_id="01a2347b-0000-7000-8000-000000000000"), env)
        resets = int(time.time()) + 7200
        fake.script.failures = [fake_openai.usage_limit(resets)]
        found["usage_limit"] = _invoke(CodexHarness(), CODEX, _request(root, repo, "c4"), env)
        found["usage_limit"] |= {"recorded_at": time.time(), "resets_at": resets}
        fake.script.failures = [fake_openai.rate_limited()]
        found["rate_limited"] = _invoke(CodexHarness(), CODEX, _request(root, repo, "c5"), env)
    return found


def record_gemini(root: Path) -> dict[str, dict[str, Any]]:
    repo = root / "gemini-repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    home = root / "gemini-user"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}}))
    found: dict[str, dict[str, Any]] = {}
    steps = [("write_file", {"file_path": str(repo / "notes.md"), "content": "one\n"}),
             ("run_shell_command", {"command": "cat missing.txt", "description": "fails"})]
    with fake_gemini.FakeGemini(fake_gemini.Script(plan=_plan(steps))) as fake:
        env = base_env(home, GEMINI_API_KEY=fake_gemini.API_KEY,
                       GOOGLE_GEMINI_BASE_URL=fake.base_url)
        model = {"model": fake_gemini.MODEL}
        found["tools"] = _invoke(GeminiHarness(), GEMINI, _request(root, repo, "g1", **model), env)
        found["lost"] = _invoke(GeminiHarness(), GEMINI, _request(
            root, repo, "g2", resume_id="0000aaaa-0000-4000-8000-000000000000", **model), env)
        fake.script.failures = [fake_gemini.resource_exhausted(
            "You exceeded your current quota, please check your plan and billing details.",
            retry_delay_s=3600, quota_id="GenerateRequestsPerDayPerProjectPerModel-FreeTier")]
        found["daily_quota"] = _invoke(GeminiHarness(), GEMINI, _request(root, repo, "g3", **model),
                                       env)
        found["daily_quota"]["recorded_at"] = time.time()
    return found


def main() -> int:
    FIXTURES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="record-streams-") as tmp:
        root = Path(tmp)
        for name, exe, record in (("codex", CODEX, record_codex),
                                  ("gemini", GEMINI, record_gemini)):
            if not os.access(exe, os.X_OK):
                print(f"{exe} is missing: run make .venv/agent-clis-ready", file=sys.stderr)
                return 1
            scenarios = record(root)
            out = {"cli": name, "version": _version(exe), "scenarios": scenarios}
            text = json.dumps(out, indent=1, ensure_ascii=False).replace(tmp, "/TMP")
            (FIXTURES / f"{name}-streams.json").write_text(text + "\n", encoding="utf-8")
            print(f"recorded {name} {out['version']}: {', '.join(scenarios)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
