"""The service's periodic ingest reads only what is new in the spool (issue
12's leftover): a file that did not grow is not opened, a grown one is read
from where the last ingest stopped, and a replaced one from the start."""

from __future__ import annotations

import os
from pathlib import Path

from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import SpoolCursor, ingest_spool
from durability.service.server import Service
from durability.store import Store


def _gap(request_id: str) -> dict[str, object]:
    return spool.gap_record(run_id="run-c", request_id=request_id, reason="jj-failed")


def test_an_ingest_with_a_cursor_reads_only_new_lines(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    path = spool.append_gap(folder, _gap("a"))
    for name in "bxyz":
        spool.append_gap(folder, _gap(name))
    cursor = SpoolCursor()
    with Store(tmp_path / "state.db") as store:
        first = ingest_spool(store, folder, cursor)
        assert (first.added, first.files) == (5, 1)
        again = ingest_spool(store, folder, cursor)
        assert (again.added, again.files) == (0, 0)  # not changed: not even opened
        # Spoil the lines already read, in place (between the first bytes and
        # the last ones before where the read stopped, which together say it
        # is still the same file): a reader that starts over would count them
        # torn; one that reads only what is new never sees them.
        size = path.stat().st_size
        assert size > 300 + 256
        with open(path, "r+b") as f:
            f.seek(300)
            f.write(b"#" * (size - 300 - 256))
        spool.append_gap(folder, _gap("c"))
        grown = ingest_spool(store, folder, cursor)
        assert (grown.added, grown.files, grown.torn) == (1, 1, 0)
        assert sorted(g.request_id for g in store.gaps("run-c")) == list("abcxyz")
        # Without a cursor (a command run once), the whole file is read.
        assert ingest_spool(store, folder).torn == 1


def test_a_line_being_written_is_read_once_it_is_whole(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    path = spool.append_gap(folder, _gap("a"))
    line = path.read_bytes()
    cursor = SpoolCursor()
    with Store(tmp_path / "state.db") as store:
        ingest_spool(store, folder, cursor)
        half = line.replace(b'"a"', b'"d"')
        with open(path, "ab") as f:
            f.write(half[:20])
        assert ingest_spool(store, folder, cursor).added == 0
        with open(path, "ab") as f:
            f.write(half[20:])
        done = ingest_spool(store, folder, cursor)
        assert (done.added, done.torn) == (1, 0)
        assert sorted(g.request_id for g in store.gaps("run-c")) == ["a", "d"]


def test_a_replaced_spool_file_is_read_from_the_start(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    path = spool.append_gap(folder, _gap("a"))
    spool.append_gap(folder, _gap("b"))
    cursor = SpoolCursor()
    with Store(tmp_path / "state.db") as store:
        ingest_spool(store, folder, cursor)
        os.unlink(path)
        spool.append_gap(folder, _gap("e"))  # a new file, shorter than where we were
        spool.append_gap(folder, _gap("f"))
        spool.append_gap(folder, _gap("g"))
        result = ingest_spool(store, folder, cursor)
        assert result.added == 3
        assert sorted(g.request_id for g in store.gaps("run-c")) == list("abefg")


def test_the_service_ingests_with_its_cursor(settings: Settings) -> None:
    path = spool.append_gap(settings.spool_dir, _gap("s"))
    with Service(settings) as svc:
        assert svc.spool_cursor.start(path) is None  # read at start; nothing new since
        spool.append_gap(settings.spool_dir, _gap("t"))
        start = svc.spool_cursor.start(path)
        assert start is not None and start[0] == len(path.read_bytes().splitlines()[0]) + 1
