"""Shared builders of the remote tests: bare remotes that count their pushes,
captures through the service, and the remote's view of the checkpoints."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

from durability.capture.snapshot import snapshot_now
from durability.config import Settings
from durability.store import AttemptKey
from tests.helpers import cli, git, write_script

KEY = AttemptKey("run-r", "agent", 0, 1)


def bare_remote(path: Path) -> Path:
    """A bare repository whose post-receive hook logs every push it takes:
    one ``push`` line per push, then git's ``old new ref`` lines."""
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True, timeout=60)
    write_script(path / "hooks" / "post-receive",
                 f"#!/bin/sh\necho push >> {path}/pushes.log\ncat >> {path}/pushes.log\n")
    return path


def pushes(remote: Path) -> list[list[str]]:
    """Each push the remote took: the ``old new ref`` lines it updated."""
    log = remote / "pushes.log"
    found: list[list[str]] = []
    for line in (log.read_text().splitlines() if log.exists() else []):
        if line == "push":
            found.append([])
        elif line.strip():
            found[-1].append(line)
    return found


def remote_refs(remote: Path) -> dict[str, str]:
    out = git(remote, "for-each-ref", "--format=%(refname) %(objectname)").stdout
    return {ref: sha for ref, sha in (line.split(" ", 1) for line in out.splitlines())}


def manifest_commits(remote: Path) -> set[str]:
    """The commits the remote's manifests list."""
    found = set()
    for ref in remote_refs(remote):
        if not ref.startswith("refs/durability/manifests/"):
            continue
        for name in git(remote, "ls-tree", "--name-only", ref).stdout.split():
            found.add(json.loads(git(remote, "cat-file", "blob", f"{ref}:{name}").stdout)
                      ["commit_id"])
    return found


def capture(worktree: Path, label: str, key: AttemptKey = KEY) -> str:
    """One checkpoint of ``worktree`` (through the service when one answers)."""
    (worktree / "work.txt").write_text(f"{label}\n")
    done = snapshot_now(Settings.from_env(), key=key, path=worktree, label=label,
                        request_id=str(uuid.uuid4()))
    assert done.commit_id is not None
    return done.commit_id


def states(run_id: str = KEY.run_id, **kw: Any) -> list[dict[str, str]]:
    """Each checkpoint's ``replicated`` object, as ``snapshots --json`` shows it."""
    done = cli("snapshots", run_id, "--json", **kw)
    assert done.returncode == 0, done.stderr
    return [row["replicated"] for row in json.loads(done.stdout)]


def quick_states(run_id: str = KEY.run_id) -> list[dict[str, str]]:
    """``states`` read in this process (for polling: no command started)."""
    from durability.store import Store
    from durability.store.remote_rows import Remotes

    path = Settings.from_env().database
    with Store(path) as store:
        rows = store.checkpoints(run_id)
    found = Remotes(path).states(rows)
    return [found.get(c.request_id, {}) for c in rows]


def own_store(env: dict[str, str]) -> dict[str, str]:
    """``env`` with a state store of its own for another machine: under
    PostgreSQL (``DURABILITY_TEST_DATABASE=postgresql``) a new schema beside
    the one the suite's URL names, which would otherwise be shared."""
    url = env.get("DURABILITY_DATABASE_URL")
    if not url:
        return env  # SQLite: the machine's own DURABILITY_HOME holds its store
    import psycopg

    base = url.split("&options=", 1)[0]
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return {**env, "DURABILITY_DATABASE_URL":
            f"{base}&options={quote(f'-c search_path={schema}')}"}


def add_remote(worktree: Path, name: str, url: str, **kw: Any) -> None:
    done = cli("remote", "add", name, url, "--worktree", str(worktree), **kw)
    assert done.returncode == 0, done.stderr
