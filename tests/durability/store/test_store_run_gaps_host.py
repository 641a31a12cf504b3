"""A run's gaps are this machine's: two machines sharing a store may file
gaps under the same run id at the same path (``Store.gaps``, as
``Store.checkpoints``).  SQLite and PostgreSQL (``db_location``)."""

from __future__ import annotations

from durability.store import Gap, Store
from durability.store.database import Location


def test_a_runs_gaps_are_the_machines_own(db_location: Location) -> None:
    with Store(db_location, host="m1") as m1, Store(db_location, host="m2") as m2:
        m1.add_gaps([Gap(5, "run", "gap-m1", "timeout", worktree="/workspace")])
        m2.add_gaps([Gap(6, "run", "gap-m2", "timeout", worktree="/workspace")])
        assert [g.request_id for g in m1.gaps("run")] == ["gap-m1"]
        assert [g.request_id for g in m2.gaps("run")] == ["gap-m2"]
        with Store(db_location, host="m3") as m3:
            assert m3.gaps("run") == []
