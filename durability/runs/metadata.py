"""What a run was started from: the workflow file, the project modules it
imports, its path and the repository root.

Stored at start and checked on every resume (resume contract 4, docs/how-to/runs.md): a changed
or missing file fails with ``RESUME_METADATA_MISMATCH`` naming it.  Files are
rehashed from disk *before* the workflow runs again, so an edited workflow
never executes before the check.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from durability.ground.store_errors import ResumeMetadataMismatch

__all__ = ["Metadata", "compute", "find_repo_root", "verify"]


@dataclass(frozen=True)
class Metadata:
    workflow_path: str
    repo_root: str
    #: repository-relative path -> sha256 of the file's bytes
    files: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"files": self.files}, sort_keys=True)


def find_repo_root(path: Path) -> Path:
    """The nearest folder above ``path`` holding ``.jj`` or ``.git``; else its folder."""
    start = path.parent if path.is_file() else path
    for candidate in (start, *start.parents):
        if (candidate / ".jj").is_dir() or (candidate / ".git").exists():
            return candidate
    return start


def compute(workflow_path: Path, modules: Iterable[types.ModuleType]) -> Metadata:
    """Hash the workflow file and every module among ``modules`` that lives in
    the repository (installed packages and virtualenvs excluded)."""
    root = find_repo_root(workflow_path)
    files = {_rel(workflow_path, root): _sha(workflow_path)}
    for module in modules:
        source = _project_file(module, root)
        if source is not None:
            files[_rel(source, root)] = _sha(source)
    return Metadata(str(workflow_path), str(root), files)


def verify(stored: Metadata, workflow_path: Path, *, accept_change: bool) -> Metadata:
    """Check ``stored`` against the disk now; return the metadata to keep.

    Path and root drift always fail.  A changed or missing file fails unless
    ``accept_change``, which waives the hash check only.
    """
    root = find_repo_root(workflow_path)
    if str(workflow_path) != stored.workflow_path:
        raise ResumeMetadataMismatch(f"workflow path changed: {stored.workflow_path} -> "
                                     f"{workflow_path}")
    if str(root) != stored.repo_root:
        raise ResumeMetadataMismatch(f"repository root changed: {stored.repo_root} -> {root}")
    current = {rel: _sha_or_none(root / rel) for rel in stored.files}
    changed = sorted(rel for rel, sha in current.items() if sha != stored.files[rel])
    if changed and not accept_change:
        named = ", ".join(f"{rel} ({'missing' if current[rel] is None else 'changed'})"
                          for rel in changed)
        raise ResumeMetadataMismatch(f"workflow changed since the run started: {named}; "
                                     "revert it or pass --accept-workflow-change")
    files = {rel: sha for rel, sha in current.items() if sha is not None}
    return Metadata(stored.workflow_path, stored.repo_root, files)


def _project_file(module: types.ModuleType, root: Path) -> Path | None:
    source = getattr(module, "__file__", None)
    if not source or not source.endswith(".py"):
        return None
    path = Path(os.path.abspath(source))
    excluded = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    if any(path.is_relative_to(p) for p in excluded) or "site-packages" in path.parts:
        return None
    return path if path.is_relative_to(root) and path.is_file() else None


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _sha_or_none(path: Path) -> str | None:
    try:
        return _sha(path)
    except OSError:
        return None
