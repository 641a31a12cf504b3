"""Issue 12: a hook whose service dies mid-request (SIGKILL while it
captures) falls back in-process (``hook/entry.py``: ConnectionLost is a
ServiceUnreachable); whatever that fallback manages, the call is on record
exactly once: one checkpoint, or one gap, never both and never two.

Real parts: the installed ``durability serve`` killed with SIGKILL while its
jj is held at a gate, the installed hook, real jj repositories.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from durability.config import Settings
from durability.gaps import spool
from durability.gaps.ingest import ingest_spool
from durability.store import Store
from tests.helpers import (
    GatedJj,
    durability_exe,
    hook_payload,
    jj_path,
    pid_alive,
    start_service,
    wait_for,
    write_script,
)

pytestmark = pytest.mark.timing

RUN = "run-dies"
CALL = "toolu_orphaned"
# Short enough that a fallback held at its gate runs out of budget quickly.
BUDGET_MS = "4000"
# Long enough for a fallback that captures to fit on a loaded machine.
ROOMY_MS = "30000"


def _spool_lines(settings: Settings) -> list[dict[str, Any]]:
    """Every spool line of the run, in every spool folder (duplicates kept)."""
    lines = []
    for folder in settings.spool_dirs:
        for path in spool.spool_files(folder):
            lines += spool.read_spool(path).records
    return lines


def _record(settings: Settings) -> tuple[list[Any], list[Any], list[dict[str, Any]]]:
    """The run's checkpoints, gaps (after ingesting) and spool lines."""
    with Store(settings.database) as store:
        ingest_spool(store, settings.spool_dirs)
        return store.checkpoints(RUN), store.gaps(RUN), _spool_lines(settings)


def _kill_service_mid_capture(tmp_path: Path, repo: Path, hook_jj: str, when: str = "before",
                              budget_ms: str = ROOMY_MS) -> subprocess.CompletedProcess[bytes]:
    """Send one hook call to a service whose jj is held at a gate, SIGKILL the
    service there, and let the hook finish (in-process); its result."""
    gated = GatedJj(tmp_path / "service-gate", when=when)
    service = start_service(tmp_path, env={**os.environ, "DURABILITY_JJ": str(gated.path)})
    try:
        gated.close()
        (repo / "tool-output.txt").write_text("written by the tool call\n")
        payload = tmp_path / "payload.json"
        payload.write_text(json.dumps(hook_payload(repo, session_id=RUN, tool_use_id=CALL)))
        with payload.open("rb") as stdin:
            hook = subprocess.Popen([durability_exe(), "snapshot-hook"], stdin=stdin,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    env={**os.environ, "DURABILITY_HOOK_TIMEOUT_MS": budget_ms,
                                         "DURABILITY_JJ": hook_jj})
        held = gated.wait_held()
        service.proc.send_signal(signal.SIGKILL)
        service.proc.wait(30)
        out, err = hook.communicate(timeout=120)
    finally:
        gated.open()
        service.kill()
    # The killed service's jj finishes on its own; it must record nothing.
    wait_for(lambda: not any(pid_alive(p) for p in held), timeout=60)
    assert (hook.returncode, out) == (0, b""), err.decode()
    return subprocess.CompletedProcess(hook.args, hook.returncode, out, err)


def test_a_fallback_that_runs_out_of_budget_is_one_gap(
    tmp_path: Path, repo: Path, settings: Settings
) -> None:
    own = GatedJj(tmp_path / "hook-gate")  # the fallback's jj is held too
    own.close()
    try:
        _kill_service_mid_capture(tmp_path, repo, str(own.path), budget_ms=BUDGET_MS)
        held = own.wait_held()
    finally:
        own.open()
    wait_for(lambda: not any(pid_alive(p) for p in held), timeout=60)
    checkpoints, gaps, lines = _record(settings)
    assert checkpoints == []
    # jj-timeout: the fallback's jj is bounded by what is left of the budget
    # and is stopped first; timeout: the hook's watchdog won on a slow machine.
    (gap,) = gaps
    assert (gap.reason in {"jj-timeout", "timeout"}, gap.tool_use_id) == (True, CALL)
    assert [(r["reason"], r["tool_use_id"]) for r in lines] == [(gap.reason, CALL)]
    # A restarted service ingests the spool again: still that one gap.
    service = start_service(tmp_path)
    service.stop()
    checkpoints, gaps, _ = _record(settings)
    assert (checkpoints, len(gaps)) == ([], 1)


def test_a_fallback_whose_capture_fails_is_one_gap(
    tmp_path: Path, repo: Path, settings: Settings
) -> None:
    broken = write_script(tmp_path / "broken-jj", (
        "#!/bin/sh\n"
        f'[ "$1" = "--version" ] && exec {shlex.quote(jj_path())} "$@"\n'
        "echo 'jj: simulated failure' >&2\n"
        "exit 1\n"))
    _kill_service_mid_capture(tmp_path, repo, str(broken))
    checkpoints, gaps, lines = _record(settings)
    assert checkpoints == []
    assert len(gaps) == 1 and gaps[0].tool_use_id == CALL
    assert [r["request_id"] for r in lines] == [gaps[0].request_id]


@pytest.mark.parametrize("when", ["before", "after"])
def test_a_fallback_that_captures_is_one_checkpoint_and_no_gap(
    tmp_path: Path, repo: Path, settings: Settings, when: str
) -> None:
    # "after": the service's jj had taken its snapshot when the service died,
    # but nothing was recorded; the fallback captures again, once.
    _kill_service_mid_capture(tmp_path, repo, jj_path(), when=when)
    checkpoints, gaps, lines = _record(settings)
    assert [(c.seq, c.tool_use_id) for c in checkpoints] == [(1, CALL)]
    assert (gaps, lines) == ([], [])
