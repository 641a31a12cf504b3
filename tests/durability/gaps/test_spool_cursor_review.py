"""Review of the service's spool cursor (issue 12): a spool file cut back and
grown again, or replaced by a copy that starts the same, between two ingests
must not lose the gaps past the old read position."""

from __future__ import annotations

import os
from pathlib import Path

from durability.gaps import spool
from durability.gaps.ingest import SpoolCursor, ingest_spool
from durability.store import Store


def _gap(request_id: str) -> dict[str, object]:
    return spool.gap_record(run_id="run-r", request_id=request_id, reason="jj-failed",
                            detail="x" * 400)


def test_a_file_cut_back_and_grown_past_the_old_end_is_read_again(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    path = spool.append_gap(folder, _gap("a"))
    first_line = path.stat().st_size
    spool.append_gap(folder, _gap("b"))
    cursor = SpoolCursor()
    with Store(tmp_path / "state.db") as store:
        assert ingest_spool(store, folder, cursor).added == 2
        os.truncate(path, first_line)  # same file, same first bytes
        for name in ("c-longer-request-id", "d", "e"):
            spool.append_gap(folder, _gap(name))
        result = ingest_spool(store, folder, cursor)
        assert result.torn == 0
        assert sorted(g.request_id for g in store.gaps("run-r")) == [
            "a", "b", "c-longer-request-id", "d", "e"]


def test_a_file_replaced_by_a_copy_that_starts_the_same_is_read_again(tmp_path: Path) -> None:
    folder = tmp_path / "spool"
    path = spool.append_gap(folder, _gap("a"))
    spool.append_gap(folder, _gap("b"))
    cursor = SpoolCursor()
    with Store(tmp_path / "state.db") as store:
        ingest_spool(store, folder, cursor)
        lines = path.read_bytes().splitlines(keepends=True)
        other = tmp_path / "other.ndjson"
        other.write_bytes(lines[0])  # a rotated file: the first line kept, then new ones
        spool.append_gap(tmp_path / "spool2", _gap("zz-new-longer-name"))
        new = next((tmp_path / "spool2").iterdir()).read_bytes()
        other.write_bytes(lines[0] + new + new.replace(b"zz-new-longer-name", b"yy"))
        other.chmod(0o600)
        os.replace(other, path)
        result = ingest_spool(store, folder, cursor)
        assert result.torn == 0
        assert sorted(g.request_id for g in store.gaps("run-r")) == [
            "a", "b", "yy", "zz-new-longer-name"]
