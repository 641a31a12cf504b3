"""``durability gc`` through the installed command: the summary, the dry
run's JSON, and a bad config file as one ``invalid-value`` line."""

from __future__ import annotations

import json
import os
from pathlib import Path

from durability.config import Settings
from tests.durability.retention.gckit import Recorder, make_repo
from tests.helpers import run_cli


def test_gc_summary_and_dry_run(tmp_path: Path, settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    for _ in range(3):
        rec.capture()
    rec.close()
    dry = run_cli("gc", "--dry-run", "--keep-all-days", "0", "--hourly-days", "0",
                  "--daily-days", "0", "--json")
    assert dry.returncode == 0, dry.stderr
    data = json.loads(dry.stdout)
    assert data["dry_run"] is True
    assert data["checkpoints"] == {"before": 3, "dropped": 2, "kept": 1,
                                   "kept_by": {"newest": 1}}
    assert data["repositories"][0]["backend"] == "git"
    assert data["bytes"]["after"] is None  # nothing was collected
    done = run_cli("gc", "--keep-all-days", "0", "--hourly-days", "0", "--daily-days", "0",
                   "--prune-grace", "0")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "dropped 2 of 3 checkpoints (kept: 1 newest)"
    assert done.stdout.splitlines()[1].startswith("refs ")


def test_bad_config_file_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[retention]\nkeep_everything = true\n")
    done = run_cli("gc", env={**os.environ, "DURABILITY_CONFIG": str(config)})
    assert done.returncode == 2
    assert done.stderr.startswith("durability: invalid-value: unknown retention setting")
    assert len(done.stderr.splitlines()) == 1
