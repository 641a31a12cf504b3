"""Issue 8 item 10: a state database that existed and is now empty or
unreadable is ``store-unavailable``, never silently replaced by a fresh one
(seq numbering would restart at 1 and the history would look lost)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from durability.store import AttemptKey, NewCheckpoint, Store, StoreUnavailable
from tests.helpers import cli

# About the SQLite file itself: stays on SQLite when the suite runs on PostgreSQL.
pytestmark = pytest.mark.sqlite_file

KEY = AttemptKey("run-p", "n", 0, 1)


def _db() -> Path:
    return Path(os.environ["DURABILITY_HOME"]) / "state.db"


def _record(store: Store, request_id: str, commit: str) -> int:
    new = NewCheckpoint(key=KEY, commit_id=commit, worktree="/w", source="manual",
                        request_id=request_id)
    return store.record_checkpoint(new).seq


def _existing_store() -> Path:
    path = _db()
    with Store(path) as store:
        assert _record(store, "r1", "a" * 40) == 1
    return path


@pytest.mark.parametrize("content", [b"", b"this is not a database, it was overwritten\n"])
def test_an_emptied_or_damaged_database_is_refused_not_recreated(content: bytes) -> None:
    path = _existing_store()
    path.write_bytes(content)
    with pytest.raises(StoreUnavailable, match=r"state\.db"):
        Store(path)
    assert path.read_bytes() == content  # left as found, for the user to inspect


def test_a_database_path_that_is_not_a_file_is_refused() -> None:
    # Unreadable in a way root cannot bypass (a mode-000 file is readable by root).
    path = _db()
    path.mkdir(parents=True)
    with pytest.raises(StoreUnavailable, match=r"state\.db"):
        Store(path)
    assert path.is_dir()


def test_snapshot_and_doctor_fail_on_an_emptied_database(repo: Path) -> None:
    first = cli("snapshot", str(repo), "--run", "run-p", "--node", "n")
    assert first.returncode == 0, first.stderr
    _db().write_bytes(b"")
    (repo / "more.txt").write_text("more\n")
    again = cli("snapshot", str(repo), "--run", "run-p", "--node", "n", "--json")
    assert again.returncode == 6, again.stdout
    assert again.stderr.count("\n") == 1
    assert again.stderr.startswith("durability: store-unavailable:")
    assert "empty" in again.stderr
    assert _db().stat().st_size == 0
    doctor = cli("doctor")
    assert doctor.returncode == 1
    assert any(ln.startswith("FAIL") and "state" in ln for ln in doctor.stdout.splitlines())


def test_a_missing_database_is_created_once_under_a_race(tmp_path: Path) -> None:
    # Several processes' first use at once: every opener must see one database
    # with the full schema, none a half-made file.
    path = tmp_path / "fresh" / "state.db"
    errors: list[BaseException] = []
    seqs: list[int] = []

    def open_and_record(i: int) -> None:
        try:
            with Store(path) as store:
                seqs.append(_record(store, f"race-{i}", f"{i:040x}"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_record, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert sorted(seqs) == list(range(1, 9))
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".state.db.")]
