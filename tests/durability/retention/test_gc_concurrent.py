"""``durability gc`` (the installed command, another process) while captures
of the same worktree keep coming: no capture fails or is lost, seq is never
handed out twice, and every checkpoint gc kept restores to what it held."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from durability.config import Settings
from durability.restore.apply import restore
from durability.store import Store
from tests.durability.retention.gckit import KEY, Recorder, file_at, make_repo
from tests.helpers import cli

GC_ALL = ("gc", "--keep-all-days", "0", "--hourly-days", "0", "--daily-days", "0",
          "--pre-restore-days", "0", "--jj-op-log-days", "0", "--json")


# Grace 0: the object gc runs under the worktree locks; a grace: after them.
@pytest.mark.slow
@pytest.mark.parametrize(("kind", "grace"), [("git", "0"), ("jj", "0"), ("git", "3600")])
def test_gc_during_captures_loses_nothing(kind: str, grace: str, tmp_path: Path,
                                          settings: Settings) -> None:
    wt = make_repo(kind, tmp_path / "wt")
    rec = Recorder(settings, wt)
    for _ in range(5):
        rec.capture()  # something for the first gc to drop
    seqs: list[int] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def capture_loop() -> None:
        try:
            while not stop.is_set() or len(seqs) < 8:
                seqs.append(int(rec.capture().seq or 0))
        except BaseException as exc:  # the assertion in capture(): a failed capture
            failures.append(exc)

    worker = threading.Thread(target=capture_loop, name="captures")
    worker.start()
    dropped = 0
    try:
        for _ in range(2):
            done = cli(*GC_ALL, "--prune-grace", grace)
            assert done.returncode == 0, done.stderr
            dropped += json.loads(done.stdout)["checkpoints"]["dropped"]
    finally:
        stop.set()
        worker.join(timeout=300)
    assert not failures, failures
    assert dropped >= 4
    assert seqs == list(range(6, 6 + len(seqs)))  # every capture recorded, none reused
    with Store(settings.database) as store:
        rows = store.checkpoints(KEY.run_id)
    assert rows[-1].seq == seqs[-1]
    for row in rows:
        assert file_at(wt, row.commit_id) == rec.content[(KEY, row.seq)]
    rec.close()
    for row in rows:  # every checkpoint gc kept restores
        restore(settings, run_id=KEY.run_id, node_id=KEY.node_id, seq=row.seq)
        assert (wt / "work.txt").read_bytes() == rec.content[(KEY, row.seq)]
