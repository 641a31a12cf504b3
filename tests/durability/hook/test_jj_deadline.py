"""A hanging jj in the hook's in-process capture is a ``jj-timeout`` gap filed
within the budget, however long the capture's earlier steps took.

jj's timeout used to be fixed when the backend was made, before the
``jj --version`` check ran: on a loaded machine that check (and on
PostgreSQL, the store's queries) pushed the hanging jj past the hook's
watchdog, and the call became the watchdog's ``timeout`` gap (seen on a
loaded run of test_hook_postgres.py).  Each jj command's timeout is now cut
to the deadline as that command starts.  Here the version check is made
slow on purpose (1 s, far beyond the 0.2 s between jj's deadline and the
watchdog), so the old behaviour fails on any machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.durability.hook.test_entry import hang_jj

pytestmark = pytest.mark.timing


def test_a_slow_version_check_comes_out_of_a_hanging_jjs_share(repo: Path,
                                                               tmp_path: Path) -> None:
    hang_jj(repo, tmp_path, "sess-slow-version",
            version='if [ "$1" = "--version" ]; then\n  sleep 1; echo "jj 0.46.0"; exit 0\nfi\n',
            budget_ms=3000, reason="jj-timeout")
