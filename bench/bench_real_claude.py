"""The hook as a real harness pays it (issue 25): the pinned Claude Code CLI
driven against the tests' loopback stand-in of the Messages API
(tests/e2e/fake_anthropic.py), N Bash tool calls per session, each appending
to one tracked file.

For each backend (a colocated jj repository, a plain git repository) and size
(1k, 10k files), sessions run in pairs, interleaved: one without any hook,
one with the hook ``durability install-hook`` writes (PreToolUse,
PostToolUse, ...), passed with ``--settings``, and a private service up.  A
tool call's time is what the stand-in sees between answering with a
``tool_use`` and receiving its ``tool_result`` (Claude Code runs the tool and
its hooks in between); the overhead per tool call is the hook session's
median minus the paired no-hook session's median.

Printed beside it, measured in the same run, interleaved: raw ``jj util
snapshot`` after a one-file edit, ``git add -A`` + ``git write-tree`` with a
private index, and the interpreter's floor (``python -c pass`` and ``python
-S -c pass``).  A tool call runs two hook processes (pre and post), so the
floor of a call is two interpreter starts.  A third session of each pair
runs the same hooks with each command replaced by ``python -c pass`` (the
"floor hook"): the interpreter's floor as Claude Code pays it, its spawning
and reading of a hook included, measured in the same sessions' rhythm; the
post-call hook is printed against it too.

Usage: ``.venv/bin/python bench/bench_real_claude.py --calls 20 --pairs 3``;
``--debug-dir DIR`` keeps Claude Code's debug logs (``--debug-file``, hooks
with timestamps).  Not a test: it asserts no speed, but it stops when a
session fails or the hook leaves a gap.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchkit import Bench, timed  # noqa: E402

from tests.e2e.fake_anthropic import FakeAnthropic, Script  # noqa: E402

CLAUDE = ROOT / ".venv" / "claude-code" / "node_modules" / ".bin" / "claude"
SESSION_TIMEOUT_S = 600
#: A command to run Claude Code under (strace, for a look at what it runs).
CLAUDE_WRAP: list[str] = []


class TimedFake(FakeAnthropic):
    """The stand-in, noting when each Messages request arrived."""

    def __init__(self, script: Script) -> None:
        super().__init__(script)
        self.arrivals: list[tuple[float, Any]] = []

    def record(self, method: str, path: str, body: Any) -> int:
        if method == "POST" and path.split("?")[0] == "/v1/messages" and isinstance(body, dict) \
                and body.get("tools"):
            self.arrivals.append((time.perf_counter(), body))
        return super().record(method, path, body)


def call_gaps(fake: TimedFake) -> list[float]:
    """Per tool call, ms from the request answered with its tool_use to the
    request carrying its result (the stand-in's answer is a few ms)."""
    by_results: dict[int, float] = {}
    for at, body in fake.arrivals:
        from tests.e2e.fake_anthropic import results_in

        by_results.setdefault(len(results_in(body)), at)
    counts = sorted(by_results)
    return [(by_results[n + 1] - by_results[n]) * 1000 for n in counts if n + 1 in by_results]


class Session:
    def __init__(self, bench: Bench, repo: Path, calls: int, settings: Path | None,
                 debug: Path | None) -> None:
        self.bench, self.repo, self.calls, self.settings, self.debug = \
            bench, repo, calls, settings, debug
        #: The last session's post-call hooks, ms (from its debug log).
        self.post_hooks: list[float] = []

    def env(self, base_url: str) -> dict[str, str]:
        b = self.bench.env
        keep = ("HOME", "LANG", "TMPDIR", "JJ_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_NOSYSTEM",
                "PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTHONDONTWRITEBYTECODE")
        env = {k: b[k] for k in keep if k in b}
        env |= {k: v for k, v in b.items() if k.startswith("DURABILITY_")}
        env |= {"PATH": "/usr/bin:/bin", "ANTHROPIC_BASE_URL": base_url,
                "ANTHROPIC_API_KEY": "sk-ant-bench-dummy", "IS_SANDBOX": "1",
                "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
                "DISABLE_ERROR_REPORTING": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "NO_PROXY": "127.0.0.1,localhost"}
        return env

    def run(self, tag: str) -> tuple[list[float], str, float]:
        """The session's tool calls' ms, its id, and the CPU ms it cost:
        Claude Code and every process it waited for (the hooks, the tools),
        and the service's own (with the jj runs it waited for)."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        service = service_cpu_s(self.bench.service_pid)
        gaps, session = self._run(tag)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        cpu += service_cpu_s(self.bench.service_pid) - service
        return gaps, session, cpu * 1000

    def _run(self, tag: str) -> tuple[list[float], str]:
        target = self.repo / "bench-edits.txt"
        calls = self.calls

        def plan(results: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
            n = len(results)
            if n >= calls:
                return None
            return "Bash", {"command": f"echo {tag}-{n} >> {target.name}",
                            "description": "append"}

        extra: list[str] = []
        if self.settings is not None:
            extra += ["--settings", str(self.settings)]
        # Every session keeps a debug log (both of a pair, so both pay for it):
        # its timestamps give the post-call hook's time as Claude Code sees it.
        log = (self.debug or self.bench.root) / f"{tag}.log"
        extra += ["--debug-file", str(log), "--debug", "hooks"]
        fake = TimedFake(Script(plan=plan))
        with fake:
            done = subprocess.run(
                [*CLAUDE_WRAP, str(CLAUDE), "-p", "Append to the file.", "--output-format", "json",
                 "--permission-mode", "bypassPermissions", *extra],
                cwd=self.repo, env=self.env(fake.base_url), stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=SESSION_TIMEOUT_S)
            gaps = call_gaps(fake)
        if done.returncode != 0:
            sys.exit(f"bench: claude exited {done.returncode}: {done.stderr[-1500:]}")
        session = json.loads(done.stdout)["session_id"]
        if len(gaps) != calls:
            sys.exit(f"bench: {len(gaps)} tool calls seen, {calls} planned")
        self.post_hooks = post_hook_ms(log) if self.settings is not None else []
        return gaps, session


#: The sessions whose hooks only start the interpreter (``floor_hook_settings``).
FLOOR_MODE = "floor hook (python -c pass)"

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z ")


def post_hook_ms(log: Path) -> list[float]:
    """Per tool call, the post-call hook as Claude Code's debug log shows it:
    from the tool's ``tool_dispatch_end`` to the hook's output being read
    ("Hook output ..."), so spawning it and waiting for it."""
    from datetime import datetime

    out: list[float] = []
    ended: datetime | None = None
    for line in log.read_text(errors="replace").splitlines():
        m = _STAMP.match(line)
        if not m:
            continue
        at = datetime.fromisoformat(m.group(1))
        if "tool_dispatch_end" in line:
            ended = at
        elif ended is not None and "Hook output" in line:
            out.append((at - ended).total_seconds() * 1000)
            ended = None
    return out


def service_cpu_s(pid: int | None) -> float:
    """The service's CPU seconds so far, its reaped children (jj) included."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def build_git(bench: Bench, n: int) -> Path:
    repo = bench.root / f"git-{n}"
    for i in range(n):
        path = bench.file_of(repo, i)
        if i % 100 == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {i}\n" * 4)
    env = bench.env | {"GIT_AUTHOR_NAME": "B", "GIT_AUTHOR_EMAIL": "b@example.invalid",
                       "GIT_COMMITTER_NAME": "B", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    timed([bench.git, "init", "-q", str(repo)], env=env)
    timed([bench.git, "-C", str(repo), "add", "-A"], env=env)
    timed([bench.git, "-C", str(repo), "commit", "-q", "-m", "init"], env=env)
    return repo


def hook_settings(bench: Bench) -> Path:
    """The hook ``install-hook`` writes (project scope, into a scratch
    project), as a file for ``--settings``."""
    scratch = bench.root / "install-scratch"
    scratch.mkdir()
    timed([bench.durability, "install-hook", "--scope", "project", "--project-dir",
           str(scratch), "--json"], env=bench.env)
    settings = bench.root / "hook-settings.json"
    shutil.copy(scratch / ".claude" / "settings.json", settings)
    return settings


def floor_hook_settings(bench: Bench, settings: Path) -> Path:
    """The same hooks as ``settings`` (every event, matcher and timeout),
    each running only ``python -c pass``: the interpreter's floor as Claude
    Code pays it, its own spawning and reading of a hook included, with no
    launcher of ours."""
    import shlex

    config = json.loads(settings.read_text())
    for groups in config.get("hooks", {}).values():
        for group in groups:
            for hook in group.get("hooks", []):
                hook["command"] = shlex.join([sys.executable, "-c", "pass"])
    floor_path = bench.root / "floor-hook-settings.json"
    floor_path.write_text(json.dumps(config, indent=2))
    return floor_path


def floor(bench: Bench, repo: Path, kind: str, n: int) -> dict[str, float]:
    """One sample of each baseline, after a one-file edit where it captures."""
    py = sys.executable
    out = {"python -c pass": timed([py, "-c", "pass"], env=bench.env)[0] * 1000,
           "python -S -c pass": timed([py, "-S", "-c", "pass"], env=bench.env)[0] * 1000}
    bench.edit_one(repo, n)
    if kind == "jj":
        out["raw jj util snapshot"] = timed(bench.jj_argv(repo, "util", "snapshot"),
                                            env=bench.env)[0] * 1000
    else:
        genv = bench.git_env(n) | {"GIT_DIR": str(repo / ".git"), "GIT_WORK_TREE": str(repo)}
        add = timed([bench.git, "add", "-A"], env=genv)[0]
        out["git add -A + write-tree"] = (add + timed([bench.git, "write-tree"],
                                                      env=genv)[0]) * 1000
    return out


def gaps_of(bench: Bench, session: str) -> list[Any]:
    _, done = timed([bench.durability, "gaps", session, "--json"], env=bench.env)
    return list(json.loads(done.stdout))


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_args(parser)
    parser.add_argument("--no-service", action="store_true",
                        help="also time the hook with no service (in-process captures)")
    parser.add_argument("--debug-dir", type=Path, help="keep Claude Code's debug logs here")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="run the hooks as a harness started with PYTHONDONTWRITEBYTECODE=1 "
                        "over an install without bytecode caches (an empty PYTHONPYCACHEPREFIX)")
    parser.add_argument("--claude", type=Path, help="another Claude Code binary than the pinned "
                        "one (npm install --prefix DIR @anthropic-ai/claude-code@VERSION)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="set a variable for the service and the hooks (a tuning knob: "
                        "DURABILITY_INFORMED_SETTLE_MS=5); repeatable")
    args = parser.parse_args()
    global CLAUDE
    if args.claude:
        CLAUDE = args.claude
    if not os.access(CLAUDE, os.X_OK):
        sys.exit(f"bench: Claude Code is not installed at {CLAUDE}: run `make setup`")
    version = subprocess.run([str(CLAUDE), "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    root = Path(tempfile.mkdtemp(prefix="bench-claude-"))
    if args.debug_dir:
        args.debug_dir.mkdir(parents=True, exist_ok=True)
    print(f"Claude Code {version}; {args.calls} Bash calls a session, {args.pairs} pairs; "
          f"load average {os.getloadavg()[0]:.2f} at start")
    each_size(root, args, run_one)


def common_args(parser: argparse.ArgumentParser) -> None:
    """The options every real-harness bench takes."""
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--backends", default="jj,git")
    parser.add_argument("--calls", type=int, default=20, help="tool calls per session")
    parser.add_argument("--pairs", type=int, default=3, help="hook/no-hook session pairs")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")


def each_size(root: Path, args: argparse.Namespace,
              run: Callable[[Path, str, int, argparse.Namespace], None]) -> None:
    """``run`` for each backend and size, in folders of ``root`` (removed after)."""
    try:
        for kind in args.backends.split(","):
            for n in (int(s) for s in args.sizes.split(",")):
                run(root / f"{kind}-{n}", kind, n, args)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            print(f"kept {root}")


def report(title: str, loads: list[float], base: dict[str, list[float]],
           informed: dict[str, int], per_mode: dict[str, list[float]],
           per_pair: dict[str, list[float]], args: argparse.Namespace) -> float:
    """Print one size's figures (the first mode is the one without a hook);
    returns the raw capture's median, the baseline of what follows."""
    print(f"\n{title} (load average {min(loads):.2f}-{max(loads):.2f})")
    for k, samples in base.items():
        print(f"  {k:34s} median {med(samples):7.1f} ms")
    print("  service: " + ", ".join(f"{k} {v}" for k, v in informed.items())
          + f" (batches, over {args.pairs} sessions of {args.calls} calls)")
    for mode in per_mode:
        print(f"  tool call, {mode:23s} median {med(per_mode[mode]):7.1f} ms "
              f"(pairs: {', '.join(f'{x:.0f}' for x in per_pair[mode])})")
    floor_ms = med(base["python -c pass"])
    raw = med(base.get("raw jj util snapshot") or base["git add -A + write-tree"])
    nohook, *hooked = per_pair
    for mode in hooked:
        over = med([h - o for h, o in zip(per_pair[mode], per_pair[nohook], strict=True)])
        print(f"  overhead per call, {mode:18s} {over:7.1f} ms  = raw capture + "
              f"{over - raw:6.1f} ms; = 2 x python -c pass + {over - 2 * floor_ms:6.1f} ms")
    return raw


def run_one(root: Path, kind: str, n: int, args: argparse.Namespace) -> None:
    root.mkdir(parents=True)
    bench = Bench(root)
    home = root / "home"
    (home / ".claude").mkdir(parents=True)
    bench.env["HOME"] = str(home)
    bench.env["DURABILITY_AUTOSTART"] = "0"
    for pair in args.env:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            sys.exit(f"bench: --env takes NAME=VALUE, not {pair!r}")
        bench.env[name] = value
    if args.no_bytecode:
        bench.env["PYTHONDONTWRITEBYTECODE"] = "1"
        bench.env["PYTHONPYCACHEPREFIX"] = str(root / "no-caches")
    repo = bench.build_repo(n)[0] if kind == "jj" else build_git(bench, n)
    (repo / "bench-edits.txt").write_text("start\n")
    # The tree just written is still dirty in the page cache: its writeback
    # (after about 30 s) would land inside the timed sessions and slow every
    # file creation there (seen: 1-1.5 ms a create, 0.01 ms once written).
    os.sync()
    settings = hook_settings(bench)
    modes: list[tuple[str, Path | None, bool]] = [("no hook", None, False),
                                                  ("hook, service up", settings, True),
                                                  (FLOOR_MODE, floor_hook_settings(bench, settings),
                                                   False)]
    if args.no_service:
        modes.append(("hook, no service", settings, False))
    per_mode: dict[str, list[float]] = {m: [] for m, _, _ in modes}
    per_pair: dict[str, list[float]] = {m: [] for m, _, _ in modes}
    cpu_pair: dict[str, list[float]] = {m: [] for m, _, _ in modes}
    #: The service's ping counters, summed over its sessions.
    informed: dict[str, int] = {}
    #: Per mode: the post-call hooks' ms as Claude Code's debug log shows them.
    post_hooks: dict[str, list[float]] = {}
    base: dict[str, list[float]] = {}
    loads = []
    for pair in range(args.pairs):
        for mode, hook, service in modes:
            if service:
                bench.start_service()
            try:
                for k, v in floor(bench, repo, kind, n).items():
                    base.setdefault(k, []).append(v)
                tag = f"{kind}{n}-{pair}-{mode.replace(' ', '').replace(',', '-')}"
                session_run = Session(bench, repo, args.calls, hook, args.debug_dir)
                gaps, session, cpu_ms = session_run.run(tag)
                post_hooks.setdefault(mode, []).extend(session_run.post_hooks)
                if service:
                    seen = bench.ping().get("informed") or {}
                    for k in ("full", "informed", "quiet", "ahead", "from_snapshot"):
                        informed[k] = informed.get(k, 0) + int(seen.get(k) or 0)
            finally:
                if service:
                    bench.stop_service()
            cpu_pair[mode].append(cpu_ms / args.calls)
            if hook is not None and mode != FLOOR_MODE and (missed := gaps_of(bench, session)):
                sys.exit(f"bench: the hook left gaps: {missed[:3]}")
            per_mode[mode] += gaps
            per_pair[mode].append(med(gaps))
            loads.append(os.getloadavg()[0])
    raw = report(f"{kind}, {n} files", loads, base, informed, per_mode, per_pair, args)
    floor_hook = med(post_hooks.get(FLOOR_MODE) or [])
    for mode, _, _ in modes[1:]:
        if post_hooks.get(mode):
            hooks = post_hooks[mode]
            print(f"  post-call hook, as Claude Code logs it  {med(hooks):7.1f} ms  = raw capture "
                  f"+ {med(hooks) - raw:6.1f} ms (p90 {sorted(hooks)[int(len(hooks) * 0.9)]:.1f}, "
                  f"{len(hooks)} calls)")
            if mode != FLOOR_MODE:
                print(f"    = the floor hook's post-call hook + {med(hooks) - floor_hook:6.1f} ms "
                      "(both as Claude Code logs them, same sessions' pairs)")
        cpu = med([h - o for h, o in zip(cpu_pair[mode], cpu_pair["no hook"], strict=True)])
        print(f"  CPU per call, {mode:23s} {cpu:7.1f} ms  (Claude Code, hooks, service and "
              f"its jj, minus the no-hook session's)")


if __name__ == "__main__":
    main()
