"""A machine whose host name changes (macOS renames a laptop with its
network; a container is recreated with a new host name on the same state
volume) is still the same machine: its history is listed, restorable and
judged by gc after the rename.

The installed CLI runs in a UTS namespace of its own (``unshare -u``) with
another host name, so ``socket.gethostname`` really answers differently;
``DURABILITY_HOST_ID`` is unset in both runs (the id kept in the state
folder is the machine)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import durability_exe, make_git_repo, run_cli_json

RUN = "renamed-run"
# Set the host name in this namespace, then become the CLI (no shell).
_AS_HOST = ("import os, socket, sys; socket.sethostname(sys.argv[1]); "
            "os.execv(sys.argv[2], sys.argv[2:])")


def _can_rename() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-u", sys.executable, "-c",
                           "import socket; socket.sethostname('probe')"],
                          capture_output=True, timeout=60)
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not _can_rename(),
                                reason="needs root and unshare -u to change the host name")


def _as(hostname: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed CLI on a machine whose host name is ``hostname``."""
    return subprocess.run(["unshare", "-u", sys.executable, "-c", _AS_HOST, hostname,
                           durability_exe(), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def _json(hostname: str, *args: str) -> Any:
    import json

    done = _as(hostname, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_history_recorded_before_a_host_name_change_is_all_there_after(
        tmp_path: Path) -> None:
    assert "DURABILITY_HOST_ID" not in os.environ
    repo = make_git_repo(tmp_path / "repo")
    f = repo / "f.txt"
    for n in (1, 2):
        f.write_text(f"v{n}\n")
        made = _json("before-rename", "snapshot", str(repo), "--run", RUN, "--node", "n")
        assert made["seq"] == n
    f.write_text("v3, not recorded\n")

    after = "after-rename"
    assert [s["seq"] for s in _json(after, "snapshots", RUN)] == [1, 2]
    assert [e["seq"] for e in _json(after, "log", str(repo))] == [2, 1]
    done = _as(after, "restore", RUN, "--node", "n", "--seq", "1")
    assert done.returncode == 0, done.stderr
    assert f.read_text() == "v1\n"
    # Its next checkpoint continues the same worktree's numbering, and gc
    # still judges the ones from before the rename.
    f.write_text("v4\n")
    assert _json(after, "snapshot", str(repo), "--run", RUN, "--node", "n")["seq"] > 2
    report = _json(after, "gc", "--dry-run")
    assert report["checkpoints"]["before"] >= 3
    # The state folder said which machine it is, whatever the host name was.
    kept = (Path(os.environ["DURABILITY_HOME"]) / "host-id").read_text().strip()
    assert kept.startswith("before-rename-")
    assert {c["name"]: c for c in run_cli_json("doctor", cwd=repo)}["machine"]["detail"] \
        .startswith(kept)
