"""The public API: every name in ``durability.__all__`` resolves, and the
package import stays cheap (the names load on first use)."""

from __future__ import annotations

import subprocess
import sys

import durability
from durability.capture.capturer import Outcome
from durability.ground import errors
from durability.store import AttemptKey


def test_every_public_name_resolves_to_its_object() -> None:
    assert durability.AttemptKey is AttemptKey
    assert durability.Outcome is Outcome
    assert durability.DurabilityError is errors.DurabilityError
    for name in durability.__all__:
        assert getattr(durability, name) is not None, name


def test_importing_the_package_loads_none_of_the_api() -> None:
    code = ("import sys, durability; "
            "print(sorted(m for m in sys.modules if m.startswith('durability.')))")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]"


def test_snapshot_now_returns_a_typed_outcome_that_renders_as_before() -> None:
    done = Outcome("req", seq=3, commit_id="abc", deduped=True)
    assert done.to_dict() == {"seq": 3, "commit_id": "abc", "deduped": True}
    back = Outcome.from_answer("req", {"ok": True, **done.to_dict()})
    assert back == done
    failed = Outcome.from_answer("req", {"ok": False, "gap_recorded": True,
                                         "error": {"code": "jj-failed", "message": "m"}})
    assert (failed.ok, failed.error_code, failed.gap_recorded) == (False, "jj-failed", True)
