"""Restore through the installed CLI, and the state a restore must keep:
shared by the restore --path and --dry-run tests."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from durability.config import Settings
from durability.store import Store
from tests.helpers import run_cli, run_cli_json, tree_manifest

RUN = "run-paths"


def snap(repo: Path) -> dict[str, Any]:
    result: dict[str, Any] = run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    return result


def restore(*args: str) -> dict[str, Any]:
    done = run_cli("restore", RUN, "--node", "n", "--json", *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def state(root: Path) -> dict[str, Any]:
    """The tree's manifest with every file's full permission bits."""
    manifest: dict[str, Any] = dict(tree_manifest(root))
    for rel, (kind, _, _) in list(manifest.items()):
        if kind == "file":
            mode = stat.S_IMODE(os.lstat(root / rel).st_mode)
            manifest[rel] = (*manifest[rel], oct(mode))
    return manifest


def records(settings: Settings) -> tuple[list[Any], list[Any]]:
    """The run's checkpoint rows and its attempts' pointers."""
    with Store(settings.database) as store:
        return store.checkpoints(RUN), [a.jj_pointer for a in store.attempts(RUN)]
