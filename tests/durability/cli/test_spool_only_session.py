"""A session whose only records are gaps still in the spool (the plugin's
launcher filed `toolkit-missing` for each call, and no service or `gaps`
has ingested them yet) is a known session, not an unknown run id.

Found in a new user's trial of the plugin without the toolkit: `durability
gaps SESSION` listed the gaps while `durability snapshots SESSION` said
"no run or session ...: `durability sessions` lists them" (exit 3).
"""

from __future__ import annotations

from pathlib import Path

from tests.durability.install.test_onboarding import _bare_plugin, _harness_env, _run
from tests.helpers import run_cli


def test_a_session_with_only_spooled_gaps_is_known(tmp_path: Path) -> None:
    root = _bare_plugin(tmp_path)
    payload = {"session_id": "spool-only", "cwd": str(tmp_path), "tool_name": "Bash",
               "tool_use_id": "toolu_1", "hook_event_name": "PostToolUse"}
    done = _run(f'/bin/sh "{root}/durability/run-hook.sh"', payload, env=_harness_env())
    assert done.returncode == 0

    listed = run_cli("snapshots", "spool-only")

    assert listed.returncode == 0, listed.stderr
    assert "no checkpoints for run spool-only" in listed.stderr
    assert run_cli("snapshots", "never-seen").returncode == 3
