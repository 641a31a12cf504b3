"""Retention settings that are numbers but not sane ones: ``nan`` (every age
comparison with it is false, so ``keep_all_days = nan`` kept nothing recent
and gc dropped everything but the newest), ``inf`` and huge values (an
``int()`` of them crashed gc with a traceback).  Each is one ``invalid-value``
line, from the config file and from the command's options."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from durability.config import Settings
from durability.ground.errors import InvalidInput
from durability.retention.policy import MAX_SETTING, Policy, load_policy
from tests.durability.retention.gckit import Recorder, make_repo
from tests.helpers import run_cli


@pytest.mark.parametrize("value", ["nan", "inf", "+inf", "1e400", "1e300", "-0.5"])
@pytest.mark.parametrize("name", ["keep_all_days", "prune_grace_s", "service_interval_hours",
                                  "jj_op_log_days"])
def test_config_refuses_non_finite_and_huge_numbers(tmp_path: Path, name: str,
                                                    value: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f"[retention]\n{name} = {value}\n")
    with pytest.raises(InvalidInput, match=name):
        load_policy({"DURABILITY_CONFIG": str(path)})


def test_the_largest_allowed_value_is_usable() -> None:
    policy = Policy().with_values({"keep_all_days": MAX_SETTING, "prune_grace_s": MAX_SETTING,
                                   "service_interval_hours": MAX_SETTING})
    assert policy.keep_all_days == MAX_SETTING


@pytest.mark.parametrize("option", ["--keep-all-days", "--prune-grace", "--jj-op-log-days"])
def test_gc_option_nan_is_one_line_and_drops_nothing(tmp_path: Path, settings: Settings,
                                                     option: str) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    for _ in range(3):
        rec.capture()
    rec.close()
    done = run_cli("gc", option, "nan", "--prune-grace", "0") if option != "--prune-grace" else \
        run_cli("gc", option, "nan")
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("durability: invalid-value: ")
    assert len(done.stderr.splitlines()) == 1
    left = run_cli("gc", "--dry-run", "--json")
    assert '"before": 3' in left.stdout


def test_gc_config_inf_grace_is_one_line(tmp_path: Path, settings: Settings) -> None:
    wt = make_repo("git", tmp_path / "wt")
    rec = Recorder(settings, wt)
    rec.capture()
    rec.close()
    config = tmp_path / "config.toml"
    config.write_text("[retention]\nprune_grace_s = inf\n")
    done = run_cli("gc", env={**os.environ, "DURABILITY_CONFIG": str(config)})
    assert done.returncode == 2
    assert done.stderr.startswith("durability: invalid-value: ")
    assert len(done.stderr.splitlines()) == 1
