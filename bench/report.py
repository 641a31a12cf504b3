"""The tables ``bench/bench_capture.py`` prints, and its JSON record."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from benchkit import Samples

__all__ = ["SizeResult", "print_report", "to_json"]


@dataclass
class SizeResult:
    n_files: int
    reps: int
    first_snapshot_s: float
    samples: dict[str, Samples] = field(default_factory=dict)
    hook_rounds: list[tuple[float, int]] = field(default_factory=list)
    socket_rounds: list[tuple[float, int]] = field(default_factory=list)

    def col(self, name: str) -> Samples:
        return self.samples.setdefault(name, Samples(name))



HOOK_TARGET_MS = 15.0  # issue 25 (was 35 in issue 20)
MAX_SNAPSHOTS_TARGET = 3


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def print_report(command: str, info: dict[str, Any], base: dict[str, Samples],
                 results: list[SizeResult], k: int, total_s: float) -> None:
    print(f"\n{'=' * 100}\nCapture benchmark  ({command})")
    print(f"machine: {info['nproc']} cores, {info['memory_gib']} GiB, {info['jj']}, "
          f"Python {info['python']}, Linux {info['kernel']}; whole run {total_s:.0f}s")
    print(f"load average (1, 5, 15 min): {info['loadavg_at_start']} at start, "
          f"{info.get('loadavg_at_end')} at end")
    print("\nProcess floor, wall median / p90 ms, and CPU median ms (size independent):")
    for s in base.values():
        print(f"  {s.name:<40} {s.cell()}   CPU {s.cpu_median:6.1f}")
    _per_capture(results)
    _overheads(results)
    _concurrency(results, k)
    _targets(results, k)


def _per_capture(results: list[SizeResult]) -> None:
    names = list(results[0].samples) if results else []
    print("\nOne capture after a one-file edit, median / p90 ms:")
    print(f"  {'':<28}" + "".join(f"{f'{r.n_files:,} files ({r.reps} reps)':>24}"
                                  for r in results))
    for name in names:
        print(f"  {name:<28}" + "".join(f"{r.samples[name].cell():>24}" for r in results))
    for name in ("raw jj util snapshot", "hook end to end"):
        print(f"  {name + ', CPU':<28}" + "".join(
            f"{r.samples[name].cpu_median:>14.1f}{'':>10}" for r in results))
    print("  (CPU: user + system time of that process alone; the hook's excludes the "
          "service's jj)")


def _med(r: SizeResult, name: str) -> float:
    return r.samples[name].median


def _overheads(results: list[SizeResult]) -> None:
    print("\nWhere the hook's time goes, medians in ms (differences of the columns above):")
    print(f"  {'files':>8}  {'raw jj':>8}  {'log - raw':>9}  {'Capturer - log':>14}  "
          f"{'service - Capturer':>18}  {'hook - service':>14}  {'service - raw':>13}")
    for r in results:
        raw, log = _med(r, "raw jj util snapshot"), _med(r, "jj log -r @")
        cap, svc = _med(r, "in-process Capturer"), _med(r, "service call")
        hook = _med(r, "hook end to end")
        print(f"  {r.n_files:>8,}  {raw:8.1f}  {log - raw:9.1f}  {cap - log:14.1f}  "
              f"{svc - cap:18.1f}  {hook - svc:14.1f}  {svc - raw:13.1f}")
    print("  (Capturer - log: lock, pygit2 pin, SQLite row; service - Capturer: socket, "
          "validation, queue;\n   hook - service: process start, imports, payload parsing; "
          "service - raw: the service's own overhead)")


def _concurrency(results: list[SizeResult], k: int) -> None:
    print(f"\n{k} concurrent calls on one worktree, per round (wall ms / jj snapshots run):")
    for r in results:
        hooks = ", ".join(f"{w:.0f}/{c}" for w, c in r.hook_rounds)
        sock = ", ".join(f"{w:.0f}/{c}" for w, c in r.socket_rounds)
        print(f"  {r.n_files:>8,}  hook processes: {hooks:<32} socket requests: {sock}")


def _targets(results: list[SizeResult], k: int) -> None:
    print(f"\nTargets: hook end to end <= raw jj + {HOOK_TARGET_MS:.0f} ms at the median; "
          f"{k} concurrent hook calls run <= {MAX_SNAPSHOTS_TARGET} jj snapshots")
    print(f"  {'files':>8}  {'hook':>8}  {'raw jj':>8}  {'hook - raw':>10}  {'paired':>7}  "
          f"{'verdict':>7}  {'max snapshots':>13}  {'verdict':>7}")
    for r in results:
        hook, raw = _med(r, "hook end to end"), _med(r, "raw jj util snapshot")
        most = max((c for _, c in r.hook_rounds), default=0)
        print(f"  {r.n_files:>8,}  {hook:8.1f}  {raw:8.1f}  {hook - raw:10.1f}  "
              f"{_paired(r):7.1f}  {_verdict(hook - raw <= HOOK_TARGET_MS):>7}  {most:>13}  "
              f"{_verdict(most <= MAX_SNAPSHOTS_TARGET):>7}")
    print("  (paired: median over repetitions of hook minus the raw jj run just before it,"
          " steadier\n   than the difference of medians when the machine is busy)")


def _paired(r: SizeResult) -> float:
    hook, raw = r.samples["hook end to end"].ms, r.samples["raw jj util snapshot"].ms
    return statistics.median(h - j for h, j in zip(hook, raw, strict=True))


def to_json(command: str, info: dict[str, Any], base: dict[str, Samples],
            results: list[SizeResult], total_s: float) -> dict[str, Any]:
    return {
        "command": command, "machine": info, "total_s": round(total_s, 1),
        "floor": {s.name: s.to_json() for s in base.values()},
        "sizes": [{
            "files": r.n_files, "reps": r.reps, "first_snapshot_s": round(r.first_snapshot_s, 2),
            "columns": {name: s.to_json() for name, s in r.samples.items()},
            "concurrent_hooks": [{"wall_ms": round(w, 1), "jj_snapshots": c}
                                 for w, c in r.hook_rounds],
            "concurrent_socket": [{"wall_ms": round(w, 1), "jj_snapshots": c}
                                  for w, c in r.socket_rounds],
            "hook_minus_raw_ms": round(_med(r, "hook end to end")
                                       - _med(r, "raw jj util snapshot"), 1),
            "hook_minus_raw_paired_ms": round(_paired(r), 1),
            "median_concurrent_wall_ms": round(statistics.median(w for w, _ in r.hook_rounds), 1)
            if r.hook_rounds else None,
        } for r in results],
    }
