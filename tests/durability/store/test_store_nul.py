"""Text the database cannot hold as it is (NUL: PostgreSQL's text refuses
it) is stored losslessly, on each backend, so a hook payload with a NUL in
any field is recorded, reads back as it came, and never stops the records
of others from being written or listed."""

from __future__ import annotations

import os

import pytest

from durability.store import AttemptKey, Gap, NewCheckpoint, Store
from durability.store.database import Location
from durability.store.postgres import convert, read_back
from durability.store.text import storable

NUL = "a\x00b"
# Text that looks like the escaped form must come back as itself too.
TRICKY = ["\ufdd0", "\ufdd0a\\0b", "\\0", "\x00", "\\", "x\\\x00\\0\x00"]


def test_a_nul_in_every_checkpoint_field_is_recorded_and_read_back(
        db_location: Location) -> None:
    key = AttemptKey(f"run{NUL}", f"node{NUL}", 0, 1)
    new = NewCheckpoint(key=key, commit_id="c" * 40, worktree=f"/w/{NUL}", source="hook",
                        request_id=f"req{NUL}", tool_use_id=f"toolu{NUL}",
                        label=f"Write {NUL}", harness="claude", agent_id=f"ag{NUL}",
                        agent_type=f"ty{NUL}")
    with Store(db_location) as store:
        assert store.record_checkpoint(new).seq == 1
        assert store.record_checkpoint(new).replayed  # found again by its NUL request id
        [row] = store.checkpoints(key.run_id)
        assert (row.run_id, row.node_id, row.worktree, row.request_id, row.tool_use_id,
                row.label, row.agent_id, row.agent_type) == (
            key.run_id, key.node_id, new.worktree, new.request_id, new.tool_use_id,
            new.label, new.agent_id, new.agent_type)
        assert store.worktree_checkpoints(new.worktree) == [row]
        assert store.checkpoint(key, 1) == row


def test_a_nul_in_every_gap_field_leaves_every_gap_listed(db_location: Location) -> None:
    with Store(db_location) as store:
        bad = Gap(1, f"run{NUL}", f"gap{NUL}", f"jj-failed{NUL}", node_id=f"n{NUL}",
                  worktree=f"/w{NUL}", source=f"hook{NUL}", tool_use_id=f"t{NUL}",
                  detail=f"why{NUL}")
        later = Gap(2, "run-later", "gap-later", "jj-failed", worktree="/w")
        assert store.add_gaps([bad, later]) == 2
        assert store.gaps(bad.run_id) == [bad]
        assert store.worktree_gaps(f"/w{NUL}") == [bad]
        assert store.gaps("run-later") == [later]
        assert store.add_gaps([bad]) == 0  # the same gap again: found by its request id
        assert {s.run_id for s in store.sessions()} == {bad.run_id, "run-later"}


@pytest.mark.parametrize("text", [*TRICKY, NUL, "plain", "ünïcode"])
def test_the_postgresql_escape_is_lossless(text: str) -> None:
    assert read_back(text) == text
    assert "\x00" not in str(convert(text))
    if "\x00" not in text and not text.startswith("\ufdd0"):
        assert convert(text) == text  # everything else is stored as it is


def test_tricky_text_round_trips_through_the_store(db_location: Location) -> None:
    with Store(db_location) as store:
        gaps = [Gap(n, "run", f"g{n}", "r", detail=t) for n, t in enumerate(TRICKY)]
        assert store.add_gaps(gaps) == len(gaps)
        assert [g.detail for g in store.gaps("run")] == TRICKY


def test_a_gap_the_database_refuses_as_it_is_is_listed_in_a_storable_form(
        db_location: Location) -> None:
    """A request id past PostgreSQL's index limit (about 2,700 bytes): the
    gap is recorded with its long text cut and hashed, the others in the
    same ingest as they are, and filing it again adds nothing."""
    huge = os.urandom(10_000).hex()
    with Store(db_location) as store:
        gaps = [Gap(1, "run", huge, "jj-failed", detail=huge), Gap(2, "run", "after", "r")]
        assert store.add_gaps(gaps) == 2
        listed = store.gaps("run")
        assert [g.request_id for g in listed][1] == "after"
        first = listed[0]
        assert first.request_id in (huge, storable(huge))
        assert first.request_id[:600] == huge[:600]
        assert store.add_gaps(gaps) == 0
        assert len(store.gaps("run")) == 2
