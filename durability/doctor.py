"""``durability doctor``: is everything in place?"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from durability import client, paths
from durability.config import Settings
from durability.errors import DurabilityError
from engine import EngineError, Store

__all__ = ["Check", "run_checks"]


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def run_checks(settings: Settings, env: Mapping[str, str]) -> list[Check]:
    return [_jj(env), _state(settings), _spool(settings), _socket(settings)]


def _jj(env: Mapping[str, str]) -> Check:
    from durability.backends.jj import find_jj

    try:
        jj = find_jj(env)
    except DurabilityError as exc:
        return Check("jj", False, f"{exc.code}: {exc}")
    return Check("jj", True, f"{jj.path} (jj {jj.version_text})")


def _state(settings: Settings) -> Check:
    try:
        paths.ensure_private_dir(settings.state_dir)
        verdict = Store(settings.db_path).integrity_check()
    except (DurabilityError, EngineError, OSError) as exc:
        return Check("state", False, f"{settings.db_path}: {exc}")
    return Check("state", verdict == "ok", f"{settings.db_path} (integrity: {verdict})")


def _spool(settings: Settings) -> Check:
    try:
        paths.ensure_private_dir(settings.spool_dir)
    except DurabilityError as exc:
        return Check("spool", False, str(exc))
    mode = oct(os.stat(settings.spool_dir).st_mode & 0o777)
    return Check("spool", True, f"{settings.spool_dir} ({mode})")


def _socket(settings: Settings) -> Check:
    path = settings.socket_path
    try:
        answer = client.call(path, {"v": 1, "op": "ping"}, timeout_s=2)
    except client.Busy as exc:  # alive, but over its connection limits
        return Check("service", False, str(exc))
    except client.Unreachable:
        return Check("service", True, f"not running on {path} (hooks capture in-process)")
    except (client.ConnectionLost, client.WaitTimeout) as exc:
        return Check("service", False, f"{path}: {exc}")
    mode = oct(os.stat(path).st_mode & 0o777)
    return Check("service", bool(answer.get("ok")),
                 f"pid {answer.get('pid')} on {path} ({mode})")
