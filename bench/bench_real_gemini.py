"""The hook as the real Gemini CLI pays it (issue 25): the pinned Gemini CLI
(scripts/install-agent-clis.sh) driven headless through its adapter
(durability/agents/gemini.py) against the tests' loopback stand-in of the
Gemini API (tests/e2e/fake_gemini.py), N ``run_shell_command`` calls per
session, each appending to one tracked file.

The same shape as ``bench_real_claude.py``: for each backend (a colocated jj
repository, a plain git repository) and size, sessions run in pairs,
interleaved: one with no hook, one with the adapter's BeforeTool/AfterTool
hook (``durability snapshot-hook``, in the private ``GEMINI_CLI_HOME`` the
adapter writes) and a private service up.  A tool call's time is what the
stand-in sees between answering a turn with a ``functionCall`` and the
request carrying its ``functionResponse``; the overhead per call is the hook
session's median minus its pair's.  Printed beside it, measured in the same
run: raw ``jj util snapshot`` (or ``git add -A`` + ``git write-tree``) and
the interpreter's floor.  A call runs two hook processes (before and after).
A third session of each pair runs the same hooks as ``python -c pass`` (the
floor hook: the interpreter's floor as Gemini pays it, through its own
``bash -c``); the hook's overhead is printed against it too.

Usage: ``.venv/bin/python bench/bench_real_gemini.py --calls 20 --pairs 3``.
Not a test: it asserts no speed; it stops when a session fails, a call is
missing, or the hook leaves a gap.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_real_claude import (  # noqa: E402
    FLOOR_MODE,
    build_git,
    common_args,
    each_size,
    floor,
    gaps_of,
    med,
    report,
)
from benchkit import Bench  # noqa: E402

from durability.agents.gemini import GeminiHarness  # noqa: E402
from durability.agents.protocol import AgentRequest  # noqa: E402
from tests.e2e import fake_gemini  # noqa: E402
from tests.e2e.agent_driver import GEMINI, run  # noqa: E402
from tests.e2e.fake_gemini import FakeGemini, Script, function_responses  # noqa: E402

SESSION_TIMEOUT_S = 600


class TimedFake(FakeGemini):
    """The stand-in, noting when each agent turn (a request offering tools) arrived."""

    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.arrivals: list[tuple[float, int]] = []

    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> int:
        if method == "POST" and ":streamGenerateContent" in path and isinstance(body, dict) \
                and any(t.get("functionDeclarations") for t in body.get("tools") or []
                        if isinstance(t, dict)):
            self.arrivals.append((time.perf_counter(), len(function_responses(body))))
        return super().record(method, path, headers, body)


def call_ms(fake: TimedFake) -> list[float]:
    """Per tool call: ms from the turn answered with its call to the turn
    carrying its result (the stand-in answers in a few ms)."""
    first: dict[int, float] = {}
    for at, results in fake.arrivals:
        first.setdefault(results, at)
    return [(first[n + 1] - first[n]) * 1000 for n in sorted(first) if n + 1 in first]


def session(bench: Bench, repo: Path, calls: int, hook: tuple[str, ...], tag: str
            ) -> tuple[list[float], str]:
    target = repo / "bench-edits.txt"

    def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
        n = len(results)
        if n >= calls:
            return None
        return "run_shell_command", {"command": f"echo {tag}-{n} >> {target.name}",
                                     "description": "append"}

    home = bench.root / f"home-{tag}"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "gemini-api-key"}}}')
    hook_env = {k: v for k, v in bench.env.items() if k.startswith("DURABILITY_")}
    fake = TimedFake(Script(plan=plan))
    with fake:
        env: dict[str, str] = {
            "PATH": "/usr/bin:/bin", "HOME": str(home), "TERM": "dumb",
            "NO_PROXY": "127.0.0.1,localhost", "GEMINI_API_KEY": fake_gemini.API_KEY,
            "GOOGLE_GEMINI_BASE_URL": fake.base_url,
            **{k: bench.env[k] for k in ("LANG", "JJ_CONFIG", "GIT_CONFIG_GLOBAL",
                                         "GIT_CONFIG_NOSYSTEM") if k in bench.env}}
        request = AgentRequest(prompt="Append to the file.", worktree=repo,
                               private_dir=bench.root / f"private-{tag}",
                               hook_command=hook, hook_env=hook_env if hook else {},
                               model=fake_gemini.MODEL)
        done = run(GeminiHarness(), request, str(GEMINI), env, timeout=SESSION_TIMEOUT_S)
        times = call_ms(fake)
    if not done.final.ok or done.final.session_id is None:
        sys.exit(f"bench: gemini failed: {done.final} {done.stderr[-1500:]}")
    if len(times) != calls:
        sys.exit(f"bench: {len(times)} tool calls seen, {calls} planned")
    return times, done.final.session_id


def run_one(root: Path, kind: str, n: int, args: argparse.Namespace) -> None:
    root.mkdir(parents=True)
    bench = Bench(root)
    bench.env["DURABILITY_AUTOSTART"] = "0"
    repo = bench.build_repo(n)[0] if kind == "jj" else build_git(bench, n)
    (repo / "bench-edits.txt").write_text("start\n")
    # The tree just written is still dirty in the page cache: its writeback
    # (after about 30 s) would land inside the timed sessions and slow every
    # file creation there (seen: 1-1.5 ms a create, 0.01 ms once written).
    os.sync()
    # The floor hook: the adapter's same hooks, each only ``python -c pass``
    # (the interpreter's floor as Gemini pays it, its ``bash -c`` included).
    modes: list[tuple[str, tuple[str, ...], bool]] = [
        ("no hook", (), False), ("hook, service up", (bench.durability, "snapshot-hook"), True),
        (FLOOR_MODE, (sys.executable, "-c", "pass"), False)]
    per_mode: dict[str, list[float]] = {m: [] for m, _, _ in modes}
    per_pair: dict[str, list[float]] = {m: [] for m, _, _ in modes}
    informed: dict[str, int] = {}
    base: dict[str, list[float]] = {}
    loads = []
    for pair in range(args.pairs):
        for mode, hook, service in modes:
            if service:
                bench.start_service()
            try:
                for k, v in floor(bench, repo, kind, n).items():
                    base.setdefault(k, []).append(v)
                tag = f"{kind}{n}-{pair}-{modes.index((mode, hook, service))}"
                times, sid = session(bench, repo, args.calls, hook, tag)
                if service:
                    seen = bench.ping().get("informed") or {}
                    for k in ("full", "informed", "quiet", "ahead", "from_snapshot"):
                        informed[k] = informed.get(k, 0) + int(seen.get(k) or 0)
            finally:
                if service:
                    bench.stop_service()
            if service and (missed := gaps_of(bench, sid)):
                sys.exit(f"bench: the hook left gaps: {missed[:3]}")
            per_mode[mode] += times
            per_pair[mode].append(med(times))
            loads.append(os.getloadavg()[0])
    report(f"{kind}, {n} files", loads, base, informed, per_mode, per_pair, args)
    over = {m: med([h - o for h, o in zip(per_pair[m], per_pair["no hook"], strict=True)])
            for m in per_pair}
    extra = over["hook, service up"] - over[FLOOR_MODE]
    print(f"  overhead per call, hook over the floor hook's  {extra:6.1f} ms "
          "(two hooks a call, both as Gemini runs them)")

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(parser)
    args = parser.parse_args()
    if not os.access(GEMINI, os.X_OK):
        sys.exit(f"bench: the Gemini CLI is not installed at {GEMINI}: "
                 "run `make .venv/agent-clis-ready`")
    root = Path(tempfile.mkdtemp(prefix="bench-gemini-"))
    print(f"Gemini CLI at {GEMINI}; {args.calls} shell calls a session, {args.pairs} pairs; "
          f"load average {os.getloadavg()[0]:.2f} at start")
    each_size(root, args, run_one)

if __name__ == "__main__":
    main()
