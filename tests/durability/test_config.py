"""Issue 8 item 11: an invalid ``DURABILITY_*_MS`` value is one
``invalid-value`` error naming the variable, the same on every path: the
CLI exits 2 with one line; the hook records one invalid-value gap (and no
capture), whether or not a service answers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.gaps import spool
from durability.ground import envms
from durability.ground.errors import InvalidInput
from durability.ground.ids import safe_filename
from tests import pg
from tests.helpers import ServiceProcess, cli, hook_payload

BAD = ["abc", "nan", "inf", "-5", "0.5", "1e12", "10s"]


def _spool(run_id: str) -> list[dict[str, Any]]:
    path = Path(os.environ["DURABILITY_SPOOL_DIR"]) / (safe_filename(run_id) + spool.SUFFIX)
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _checkpoints(run_id: str) -> list[Any]:
    store = pg.existing_store()
    if store is None:
        return []
    with store:
        return store.checkpoints(run_id)


def _hook(repo: Path, run_id: str, extra: dict[str, str]) -> None:
    env = {**os.environ, **extra}
    done = cli("snapshot-hook", input=json.dumps(hook_payload(repo, session_id=run_id)),
               env=env, timeout=60)
    assert done.returncode == 0
    assert done.stdout == ""


@pytest.mark.parametrize("name", sorted(envms.MS_SETTINGS))
@pytest.mark.parametrize("raw", BAD)
def test_settings_refuse_with_the_variable_named(name: str, raw: str) -> None:
    if raw == "0.5" and envms.MS_SETTINGS[name][1]:
        # A setting that may be 0 (off) takes a fraction of a ms as 0.
        assert getattr(Settings.from_env({**os.environ, name: raw}),
                       name.removeprefix("DURABILITY_").lower()) == 0
        return
    with pytest.raises(InvalidInput, match=name) as caught:
        Settings.from_env({**os.environ, name: raw})
    assert caught.value.code == "invalid-value"


@pytest.mark.parametrize("raw", ["", "1", "250", "2.5e3", "86400000"])
def test_the_hook_and_settings_agree_on_valid_values(raw: str) -> None:
    env = {**os.environ, "DURABILITY_SERVICE_ANSWER_MS": raw}
    settings = Settings.from_env(env)
    assert envms.first_invalid(env) is None
    assert settings.service_answer_ms == int(envms.read_ms(env, "DURABILITY_SERVICE_ANSWER_MS"))


@pytest.mark.parametrize("name", ["DURABILITY_JJ_TIMEOUT_MS", "DURABILITY_HOOK_TIMEOUT_MS"])
def test_the_hook_without_a_service_records_one_invalid_value_gap(repo: Path, name: str) -> None:
    run_id = f"bad-{name.lower().replace('_', '-')}"
    _hook(repo, run_id, {name: "soon"})
    gaps = _spool(run_id)
    assert [g["reason"] for g in gaps] == ["invalid-value"]
    assert name in gaps[0]["detail"]
    assert _checkpoints(run_id) == []


def test_the_hook_with_a_service_records_the_same_gap(repo: Path,
                                                    service_process: ServiceProcess) -> None:
    _hook(repo, "bad-served", {"DURABILITY_HOOK_TIMEOUT_MS": "-1"})
    gaps = _spool("bad-served")
    assert [g["reason"] for g in gaps] == ["invalid-value"]
    assert "DURABILITY_HOOK_TIMEOUT_MS" in gaps[0]["detail"]
    assert _checkpoints("bad-served") == []


@pytest.mark.parametrize("command", [["snapshot", "--run", "r", "--node", "n"], ["doctor"]])
def test_the_cli_exits_2_with_one_line(repo: Path, command: list[str]) -> None:
    env = {**os.environ, "DURABILITY_BURST_MAX_MS": "lots"}
    done = cli(*command, env=env, cwd=repo)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("durability: invalid-value: DURABILITY_BURST_MAX_MS=")
