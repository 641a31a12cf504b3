"""What a settle window's marker costs (decision 0067): a watch's
``WindowMarker`` opening and answering windows, beside, in the same run, the
raw file operations of the layout it replaced (a file per window: create,
write, fsync, rename, folder fsync to open; unlink and folder fsync to
answer) and a bare ``pwrite`` + ``fdatasync``, the floor of one synced
rewrite.  Rounds alternate.  Nothing here asserts a speed.

    .venv/bin/python bench/bench_window_marker.py --windows 200 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from durability.store import AttemptKey
from durability.watch.window import WindowMarker

KEY = AttemptKey("bench-run", "node", 0, 1)


def _ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:6.3f} ms (p90 " \
        f"{sorted(samples)[int(len(samples) * 0.9)] * 1000:.3f})"


def _sync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-window-") as tmp:
        root = Path(tmp)
        print(f"{args.windows} windows a round, {args.rounds} rounds; "
              f"load average {os.getloadavg()[0]:.2f}")
        for rnd in range(args.rounds):
            opened: list[float] = []
            answered: list[float] = []
            marker = WindowMarker(root / f"windows-{rnd}", root / "worktree", KEY)
            for i in range(args.windows):
                t0 = time.perf_counter()
                marker.mark(1_000 + i)
                t1 = time.perf_counter()
                marker.clear()
                opened.append(t1 - t0)
                answered.append(time.perf_counter() - t1)
            marker.release()
            old_open: list[float] = []
            old_answer: list[float] = []
            folder = root / f"old-{rnd}"
            folder.mkdir()
            for i in range(args.windows):
                t0 = time.perf_counter()
                tmp_path, final = folder / f".{i}.tmp", folder / f"{i}.window"
                fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                os.write(fd, b'{"v": 1, "run_id": "bench-run", "opened_at_ms": 1000}')
                os.fsync(fd)
                os.rename(tmp_path, final)
                _sync_dir(folder)
                t1 = time.perf_counter()
                final.unlink()
                _sync_dir(folder)
                os.close(fd)
                old_open.append(t1 - t0)
                old_answer.append(time.perf_counter() - t1)
            floor: list[float] = []
            fd = os.open(root / f"floor-{rnd}", os.O_RDWR | os.O_CREAT, 0o600)
            os.write(fd, bytes(8192))
            os.fsync(fd)
            for i in range(args.windows):
                t0 = time.perf_counter()
                os.pwrite(fd, os.urandom(64), (i % 2) * 4096)
                os.fdatasync(fd)
                floor.append(time.perf_counter() - t0)
            os.close(fd)
            print(f"round {rnd + 1}: open {_ms(opened)}, answer {_ms(answered)}; "
                  f"a file per window: open {_ms(old_open)}, answer {_ms(old_answer)}; "
                  f"pwrite + fdatasync {_ms(floor)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
