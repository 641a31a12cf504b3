"""The retention policy alone: windows, thinning, keepers and the config file
(rows are built by hand; no repository is needed to judge them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from durability.ground.errors import InvalidInput
from durability.retention.policy import DAY_MS, HOUR_MS, Policy, config_path, judge, load_policy
from durability.store import Checkpoint
from durability.store.gc_rows import RetentionRow

NOW = 1_000 * DAY_MS  # a day boundary, so hour and day buckets are easy to read


def _row(seq: int, at_ms: int, *, source: str = "hook", attempt: int = 1,
         run_state: str | None = None, top: int = 10_000,
         undo_at: int | None = None) -> RetentionRow:
    c = Checkpoint("run", "session", 0, attempt, seq, f"c{attempt}-{seq}", None, None, "/wt",
                   source, None, None, f"r{attempt}-{seq}", at_ms)
    return RetentionRow(c, run_state, None, top, undo_at)


def _kept(rows: list[RetentionRow], policy: Policy) -> dict[int, str | None]:
    return {v.row.checkpoint.seq: v.kept_by for v in judge(rows, policy, NOW)}


def test_hourly_then_daily_thinning_keeps_the_newest_of_each_slot() -> None:
    policy = Policy(keep_all_days=1, hourly_days=3, daily_days=10)
    rows = [
        _row(1, NOW - 12 * HOUR_MS),                 # recent
        _row(2, NOW - 2 * DAY_MS + 5 * 60_000),      # hour H, older
        _row(3, NOW - 2 * DAY_MS + 50 * 60_000),     # hour H, newest: kept
        _row(4, NOW - 2 * DAY_MS + 70 * 60_000),     # hour H+1: kept
        _row(5, NOW - 5 * DAY_MS + HOUR_MS),         # day D, older
        _row(6, NOW - 5 * DAY_MS + 20 * HOUR_MS),    # day D, newest: kept
        _row(7, NOW - 20 * DAY_MS),                  # past every window
    ]
    assert _kept(rows, policy) == {1: "recent", 2: None, 3: "hourly", 4: "hourly",
                                   5: None, 6: "daily", 7: None}


def test_slots_are_per_attempt() -> None:
    policy = Policy(keep_all_days=0, hourly_days=3, daily_days=0)
    at = NOW - DAY_MS
    rows = [_row(1, at, attempt=1), _row(1, at + 1, attempt=2)]
    assert [v.kept_by for v in judge(rows, policy, NOW)] == ["hourly", "hourly"]


def test_newest_unfinished_and_keepers_win_over_age() -> None:
    policy = Policy(keep_all_days=0, hourly_days=0, daily_days=0, pre_restore_days=0)
    old = NOW - 100 * DAY_MS
    rows = [_row(1, old), _row(2, old, top=2), _row(3, old, run_state="waiting-approval"),
            _row(4, old, run_state="failed"), _row(5, old, source="pre-restore"),
            _row(6, old, run_state="failed")]  # what a resume of the failed run starts from
    verdicts = judge(rows, policy, NOW, [lambda c: "pinned" if c.seq == 1 else None])
    assert [v.kept_by for v in verdicts] == ["pinned", "newest", "unfinished-run", None, None,
                                             "resume-start"]


def test_pre_restore_window() -> None:
    """The window keys on what a restore named as its undo, counted from
    the restore, whatever the row's source or age."""
    policy = Policy(keep_all_days=1, hourly_days=0, daily_days=0, pre_restore_days=30)
    rows = [_row(1, NOW - 20 * DAY_MS, source="pre-restore", undo_at=NOW - 20 * DAY_MS),
            _row(2, NOW - 40 * DAY_MS, source="pre-restore", undo_at=NOW - 40 * DAY_MS),
            _row(3, NOW - 20 * DAY_MS),
            # a pre-restore capture that deduplicated onto a hook row
            _row(4, NOW - 40 * DAY_MS, undo_at=NOW - 2 * DAY_MS),
            # source alone names no undo
            _row(5, NOW - 20 * DAY_MS, source="pre-restore")]
    assert _kept(rows, policy) == {1: "pre-restore", 2: None, 3: None, 4: "pre-restore",
                                   5: None}


def test_config_file_overrides_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[retention]\nkeep_all_days = 3\nprune_grace_s = 0\n")
    policy = load_policy({"DURABILITY_CONFIG": str(path)})
    assert policy == Policy(keep_all_days=3, prune_grace_s=0)
    assert load_policy({"DURABILITY_CONFIG": str(tmp_path / "none.toml")}) == Policy()


def test_default_config_path_is_the_platform_config_folder() -> None:
    # conftest points XDG_CONFIG_HOME into the test's home.
    assert config_path({}).parts[-2:] == ("durability", "config.toml")


@pytest.mark.parametrize("text", ["[retention]\nkeep_all_day = 3\n",
                                  "[retention]\nkeep_all_days = -1\n",
                                  "[retention]\nkeep_all_days = 'x'\n",
                                  "retention = 3\n", "[retention\n"])
def test_bad_config_is_invalid_value(tmp_path: Path, text: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(InvalidInput):
        load_policy({"DURABILITY_CONFIG": str(path)})
