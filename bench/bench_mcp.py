"""MCP server benchmark (issue 14): what an agent pays to use the durability
tools through ``durability mcp`` rather than the CLI.

Builds a worktree of N small files captured twice (restorekit), starts the
installed ``durability mcp`` with the MCP SDK's stdio client, and times: the
start (spawn to the ``initialize`` answer), then each of ``snapshots``,
``show``, a ``restore`` dry run and ``snapshot_now`` as a tool call, and the
same as a CLI process (``durability ... --json``).  The baseline is the raw
backend reading the same tree (``jj status`` / ``git status``) in the same
run.  Median of five each.

Usage: ``.venv/bin/python bench/bench_mcp.py --backend jj --files 2000``.
Not a test: it asserts nothing about speed (a call that fails stops it).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from restorekit import main, two_checkpoints

ROUNDS = 5


def _ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def run(backend: str, files: int, base: Path) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    bench = two_checkpoints(backend, files, base)
    exe = str(Path(sys.executable).parent / "durability")
    raw = [bench.jj, "status"] if backend == "jj" else ["git", "status", "--porcelain"]
    calls: list[tuple[str, dict[str, Any], list[str]]] = [
        ("snapshots", {}, ["snapshots", "--latest"]),
        ("show", {"seq": 1}, ["show", "--latest", "--seq", "1"]),
        ("restore", {"seq": 1, "dry_run": True}, ["restore", "--latest", "--seq", "1",
                                                  "--dry-run"]),
        ("snapshot_now", {}, ["snapshot", ".", "--run", "bench", "--node", "n"]),
    ]

    def timed_process(argv: list[str]) -> float:
        times = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            subprocess.run(argv, cwd=bench.worktree, capture_output=True, check=True)
            times.append(time.perf_counter() - start)
        return _ms(times)

    async def session() -> dict[str, float]:
        found: dict[str, float] = {}
        params = StdioServerParameters(command=exe, args=["mcp"], env=dict(os.environ),
                                       cwd=str(bench.worktree))
        start = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            found["start"] = (time.perf_counter() - start) * 1000
            for tool, arguments, _ in calls:
                times = []
                for _ in range(ROUNDS):
                    begin = time.perf_counter()
                    done = await s.call_tool(tool, arguments)
                    times.append(time.perf_counter() - begin)
                    assert not done.is_error, done.content
                found[tool] = _ms(times)
        return found

    baseline = timed_process(raw)
    tools = asyncio.run(session())
    name = "jj status" if backend == "jj" else "git status --porcelain"
    print(f"{backend} {files} files: raw `{name}` {baseline:.0f} ms; "
          f"durability mcp start (spawn to initialize) {tools['start']:.0f} ms")
    for tool, _, command in calls:
        cli = timed_process([exe, *command, "--json"])
        print(f"  {tool:<13} MCP call {tools[tool]:7.1f} ms ({tools[tool] / baseline:.2f}x raw)"
              f"   CLI process {cli:7.1f} ms ({cli / baseline:.2f}x raw)")


if __name__ == "__main__":
    main(run, "bench-mcp-")
