"""Restore benchmark (issues 8 and 11): what a whole restore of many changed
files costs, against jj's and git's own checkouts measured in the same run.

For N files (200 folders) it builds three trees of the same files: a git
worktree and a colocated jj worktree, each captured twice through the toolkit
with every file's content changed in between, and a plain git repository with
the same two versions committed.  Then, in rounds, it times four restores
alternating the two versions for each of:

- ``durability git``: ``durability.restore.apply.restore`` on the git worktree
  (pre-restore capture, the confined writer, the verification);
- ``durability jj``: the same on the jj worktree;
- ``jj restore --from``: jj's own restore between the same two commits;
- ``git checkout``: git switching between its two commits (its index warm).

The first restore of a series is slower while the freshly written tree is
flushed, so the median of the last three is the figure.  Ratios are against
``jj restore --from``; the issue 11 target is git within 1.5x.  Beside the wall
time, the CPU time (user + system, of this process and the programs it ran):
on a loaded machine the wall time mostly measures the neighbours, the CPU
time what each restore does.

With ``--cli`` (issue 25) the two durability rows are the installed
``durability restore bench --node n --seq S`` as a whole process instead
(its start-up included, with bytecode caches as an installed toolkit has
them), each restore paired with the ``jj restore --from`` that follows it,
both backends interleaved in the same rounds: the ratio is taken pair by
pair, wall and CPU, and the load average printed with every round.

``--before DIR`` adds, in the same rounds, the CLI running the package of
another source tree (``DIR/durability``, through ``PYTHONPATH``; say a
``git archive`` of the commit before a change), so before and after are
paired too.

Usage: ``.venv/bin/python bench/bench_restore.py --files 20000 [--cli [--pairs N]
[--before DIR]]``.
Not a test: it asserts nothing about speed (a restore that fails stops it).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from restorekit import TwoCheckpoints, fmt, main, two_checkpoints


def run(_backend: str, files: int, base: Path) -> None:
    git = two_checkpoints("git", files, base / "git")
    jj = two_checkpoints("jj", files, base / "jj")
    if "--cli" in sys.argv:
        return _cli(git, jj, _pairs(), _option("--before"))
    raw = _raw_git(files, base / "raw")
    figures = {
        "durability git": _ours(git),
        "durability jj": _ours(jj),
        "jj restore --from": _jj_restore(jj),
        "git checkout": _alternate([["git", "-C", str(raw[0]), "checkout", "-q", c]
                                    for c in raw[1]]),
    }
    wall_floor = statistics.median(figures["jj restore --from"][0][1:])
    cpu_floor = statistics.median(figures["jj restore --from"][1][1:])
    print(f"{files} files, every one changed between the two versions "
          f"(load average {_load()}):")
    for name, (wall, cpu) in figures.items():
        print(f"  {name:18} wall {fmt(wall)} {statistics.median(wall[1:]) / wall_floor:4.2f}x; "
              f"cpu median {statistics.median(cpu[1:]):.2f} s "
              f"{statistics.median(cpu[1:]) / cpu_floor:4.2f}x jj restore --from")
    print(f"load average at the end {_load()}")


def _pairs() -> int:
    """``--pairs N`` (rounds of the ``--cli`` comparison), default 6."""
    return int(_option("--pairs") or 6)


def _option(name: str) -> str | None:
    args = sys.argv
    return args[args.index(name) + 1] if name in args else None


def _cli(git: TwoCheckpoints, jj: TwoCheckpoints, pairs: int, before: str | None) -> None:
    """Both backends' CLI restores, each followed by a ``jj restore --from``
    on the jj worktree, in rounds: ours on jj, jj's, ours on git, jj's.
    Every command changes every file: each goes to the version its worktree
    does not hold.  ``before``: a source tree (``--before DIR``, its
    ``durability`` package found on ``PYTHONPATH``) timed the same way in the
    same rounds, in alternating order with this one."""
    from durability.restore.apply import find_checkpoint
    from durability.store import Store

    exe = str(Path(sys.executable).parent / "durability")
    with Store(jj.settings.database) as store:
        commits = [find_checkpoint(store, run_id="bench", node_id="n", seq=s).commit_id
                   for s in jj.seqs]
    holds = {"jj": 1, "git": 1}  # each worktree holds the version captured second

    def flip(bench: TwoCheckpoints) -> int:
        holds[bench.backend] = 1 - holds[bench.backend]
        return holds[bench.backend]

    def ours(bench: TwoCheckpoints, extra: dict[str, str]) -> tuple[float, float]:
        return _process([exe, "restore", "bench", "--node", "n", "--seq",
                         str(bench.seqs[flip(bench)]), "--worktree", str(bench.worktree)],
                        bench, extra)

    def theirs() -> tuple[float, float]:
        return _process([jj.jj, "-R", str(jj.worktree), "restore", "--from",
                         commits[flip(jj)]], jj)

    codes: list[tuple[str, dict[str, str]]] = [("", {})]
    if before is not None:
        codes = [(" this tree", {}), (" --before", {"PYTHONPATH": before})]
    print(f"{git.files} files, every one changed; {pairs} rounds, the first dropped; "
          f"load average {_load()}", flush=True)
    rows: dict[str, list[tuple[tuple[float, float], tuple[float, float]]]] = {}
    for i in range(pairs):
        line = []
        for bench in (jj, git):
            for code, extra in (codes if i % 2 == 0 else codes[::-1]):
                pair = (ours(bench, extra), theirs())
                name = f"{bench.backend}{code}"
                if i:  # the first round finds a tree the disk is still flushing
                    rows.setdefault(name, []).append(pair)
                line.append(f"{name} {_pair(pair)}")
        print(f"  round {i + 1}: {'; '.join(line)}; load {_load()}", flush=True)
    for name, got in rows.items():
        wall = [a[0] / b[0] for a, b in got]
        cpu = [a[1] / b[1] for a, b in got]
        print(f"  durability restore ({name}) CLI: wall {_med(a[0] for a, _ in got):.2f} s "
              f"cpu {_med(a[1] for a, _ in got):.2f} s | jj restore --from: wall "
              f"{_med(b[0] for _, b in got):.2f} s cpu {_med(b[1] for _, b in got):.2f} s | "
              f"paired ratio median wall {_med(wall):.2f}x "
              f"({', '.join(f'{r:.2f}' for r in wall)}), cpu {_med(cpu):.2f}x", flush=True)
    print(f"load average at the end {_load()}")


def _pair(pair: tuple[tuple[float, float], tuple[float, float]]) -> str:
    (a_wall, a_cpu), (b_wall, b_cpu) = pair
    return f"{a_wall:.2f}/{b_wall:.2f} s ({a_wall / b_wall:.2f}x, cpu {a_cpu / b_cpu:.2f}x)"


def _med(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _process(argv: list[str], bench: TwoCheckpoints,
             extra: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one whole process (it must succeed).

    ``PYTHONDONTWRITEBYTECODE`` is left out of its environment (as in
    ``benchkit``): with it set every CLI start would compile the package
    again, which no installed toolkit pays."""
    base = bench.worktree.parent  # two_checkpoints' folder: its own state, spool, socket
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
           "DURABILITY_BACKEND": bench.backend,
           "DURABILITY_HOME": str(base / "state"), "DURABILITY_SPOOL_DIR": str(base / "spool"),
           "DURABILITY_SOCKET": str(base / "s.sock"), "JJ_CONFIG": str(base / "jj.toml"),
           **(extra or {})}
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"bench: {argv[:2]} failed ({proc.returncode}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime


def _timed(step: Callable[[int], object]) -> tuple[list[float], list[float]]:
    """Four runs of ``step(i)``: wall and CPU seconds of each."""
    wall, cpu = [], []
    for i in range(4):
        before = _cpu()
        start = time.perf_counter()
        step(i)
        wall.append(time.perf_counter() - start)
        cpu.append(_cpu() - before)
    return wall, cpu


def _cpu() -> float:
    own, children = (resource.getrusage(w) for w in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _ours(bench: TwoCheckpoints) -> tuple[list[float], list[float]]:
    from durability.restore.apply import restore

    return _timed(lambda i: restore(bench.settings, run_id="bench", node_id="n",
                                    seq=bench.seqs[i % 2]))


def _jj_restore(bench: TwoCheckpoints) -> tuple[list[float], list[float]]:
    from durability.restore.apply import find_checkpoint
    from durability.store import Store

    with Store(bench.settings.database) as store:
        commits = [find_checkpoint(store, run_id="bench", node_id="n", seq=s).commit_id
                   for s in bench.seqs]
    return _alternate([[bench.jj, "-R", str(bench.worktree), "restore", "--from", c]
                       for c in commits])


def _alternate(commands: list[list[str]]) -> tuple[list[float], list[float]]:
    return _timed(lambda i: subprocess.run(commands[i % 2], check=True, capture_output=True))


def _raw_git(files: int, wt: Path) -> tuple[Path, list[str]]:
    """A plain git repository with the two versions committed."""
    subprocess.run(["git", "init", "-q", str(wt)], check=True)
    commits = []
    for version in ("one", "two"):
        for i in range(files):
            folder = wt / f"d{i % 200:03d}"
            folder.mkdir(exist_ok=True)
            (folder / f"f{i:06d}.txt").write_text(f"{version} {i}\n")
        subprocess.run(["git", "-C", str(wt), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(wt), "commit", "-q", "-m", version], check=True,
                       env={**os.environ})
        commits.append(subprocess.run(["git", "-C", str(wt), "rev-parse", "HEAD"], check=True,
                                      capture_output=True, text=True).stdout.strip())
    return wt, commits


if __name__ == "__main__":
    main(run, "bench-restore-")
