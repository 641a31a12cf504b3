"""A restore never un-ignores a file behind the user's back.

A checkpoint's ``.gitignore`` files are restored like any other file, so a
restore to a checkpoint taken before a rule was added (``.env``,
``node_modules/``) would make files that are on disk, ignored and in no
checkpoint visible to the next capture: swept into a checkpoint (and pushed to
a remote), then deleted by the undo.  ``unignored`` names those files: on
disk now, ignored by the rules of the tree just captured, in neither that tree
nor the checkpoint, and not ignored by the rules the restore would leave.  A
restore that finds any refuses with ``restore-would-unignore`` before writing
anything, naming them, and so does its dry run.  Refusing, rather than
restoring and keeping those files out of later captures by some rule of our
own, is the choice: what is ignored stays what the user's ignore files say,
and the way on is theirs (move the files away, or leave the ``.gitignore``
out with ``--path``).

Only the ``.gitignore`` files differ between the two rule sets; git's
``info/exclude`` and ``core.excludesFile`` are the same before and after.
The ``info/exclude`` is the one the backend's captures read: for git, the
repository's shared one (a linked worktree's git dir has none of its own that
git reads); jj (0.46) reads the one of the git dir it works in, which for a
jj repo colocated in a linked git worktree is that worktree's own.
The two rule sets are evaluated by libgit2 in two scratch repositories that
hold nothing but those ignore files, so nothing in the worktree is read but
its folder listing, and a restore that changes no ``.gitignore`` costs one
tree diff.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pygit2

from durability.backends.git_repo import common_dir
from durability.backends.selection import covers, touches
from durability.ground.errors import RestoreError
from durability.ground.ids import printable

__all__ = ["refuse_unignore", "unignored"]

#: Paths named in a refusal; the rest are counted.
_NAMED = 5
_IGNORE_FILE = ".gitignore"
_TREE = int(pygit2.enums.ObjectType.TREE)
_BLOB = int(pygit2.enums.ObjectType.BLOB)


def unignored(repo: pygit2.Repository, root: Path, current: str, target: str,
              paths: Sequence[str] | None = None, *, backend: str) -> list[str]:
    """The files on disk in ``root`` that restoring ``target`` over
    ``current`` (at ``paths`` only, when given) would turn from ignored
    into captured by ``backend`` ("git" or "jj"); sorted, worktree-relative."""
    now_tree = repo[current].peel(pygit2.Commit).tree
    then_tree = repo[target].peel(pygit2.Commit).tree
    changed: dict[str, bytes | None] = {}
    for delta in now_tree.diff_to_tree(then_tree).deltas:
        path = delta.new_file.path
        if not _is_ignore_file(path):
            continue
        if delta.status == pygit2.enums.DeltaStatus.DELETED:
            if paths is None or touches(paths, path):
                changed[path] = None
        elif paths is None or covers(paths, path):
            changed[path] = repo[delta.new_file.id].read_raw()
    if not changed:
        return []
    now_rules = dict(_ignore_files(repo, now_tree))
    then_rules = {**now_rules, **changed}
    with tempfile.TemporaryDirectory(prefix="durability-ignore-") as scratch:
        excludes = _exclude_files(backend, repo, root)
        now = _rules(repo, excludes, Path(scratch, "now"), now_rules)
        then = _rules(repo, excludes, Path(scratch, "then"),
                      {p: b for p, b in then_rules.items() if b is not None})
        return sorted(p for p in _walk(root, now, then)
                      if p not in now_tree and p not in then_tree)


def refuse_unignore(found: Sequence[str], seq: int) -> None:
    """Raise ``restore-would-unignore`` naming ``found`` (if any)."""
    if not found:
        return
    shown = ", ".join(printable(p) for p in found[:_NAMED])
    more = f" and {len(found) - _NAMED} more" if len(found) > _NAMED else ""
    raise RestoreError(
        f"restoring seq {seq} changes the ignore rules so that {len(found)} ignored file(s) "
        f"no checkpoint holds would be captured: {shown}{more}; nothing was changed: move "
        "them away, or leave the .gitignore out with --path, and retry",
        code="restore-would-unignore")


def _is_ignore_file(path: str) -> bool:
    return path == _IGNORE_FILE or path.endswith("/" + _IGNORE_FILE)


def _ignore_files(repo: pygit2.Repository, tree: pygit2.Tree,
                  prefix: str = "") -> Iterator[tuple[str, bytes]]:
    """Every ``.gitignore`` blob of ``tree``, by path."""
    for entry in tree:
        name = entry.name or ""
        if entry.type == _TREE:
            yield from _ignore_files(repo, repo[entry.id].peel(pygit2.Tree),
                                     f"{prefix}{name}/")
        elif entry.type == _BLOB and name == _IGNORE_FILE:
            yield f"{prefix}{name}", repo[entry.id].read_raw()


def _exclude_files(backend: str, repo: pygit2.Repository, root: Path) -> list[Path]:
    """The ``info/exclude`` files whose rules ``backend``'s captures follow."""
    if backend == "git":  # libgit2, as git: the shared git dir's
        return [common_dir(Path(repo.path)) / "info" / "exclude"]
    return sorted({Path(repo.path) / "info" / "exclude", root / ".git" / "info" / "exclude"})


def _rules(repo: pygit2.Repository, excludes: Sequence[Path], scratch: Path,
           files: dict[str, bytes]) -> pygit2.Repository:
    """A scratch repository whose ignore rules are ``files``, ``excludes``
    and the worktree's ``core.excludesFile``."""
    rules = pygit2.init_repository(str(scratch))
    for rel, data in files.items():
        dest = scratch.joinpath(*rel.split("/"))
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    exclude = b""
    for path in excludes:
        try:
            exclude += path.read_bytes() + b"\n"
        except OSError:
            continue
    info = Path(rules.path, "info")
    info.mkdir(exist_ok=True)
    (info / "exclude").write_bytes(exclude)
    try:
        excludes_file = str(repo.config["core.excludesFile"])
    except (KeyError, pygit2.GitError):
        excludes_file = ""
    if excludes_file:
        rules.config["core.excludesFile"] = excludes_file
    return rules


def _ignored(rules: pygit2.Repository, path: str) -> bool:
    try:
        return bool(rules.path_is_ignored(path))
    except (UnicodeEncodeError, pygit2.GitError):
        return False  # a name pygit2 cannot take: judged as it was by the capture


def _walk(root: Path, now: pygit2.Repository, then: pygit2.Repository,
          folder: str = "", now_ignored: bool = False) -> Iterator[str]:
    """The files below ``folder`` ignored by ``now`` and not by ``then``.
    A folder ``then`` ignores is not entered (git ignores all below it); nor
    is a repository's own folder or a nested repository."""
    try:
        with os.scandir(root / folder if folder else root) as it:
            entries = [(e.name, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return
    if folder and any(name == ".git" for name, _ in entries):
        return  # a nested repository: a capture never enters it
    for name, is_dir in entries:
        rel = f"{folder}/{name}" if folder else name
        if is_dir:
            if name in (".git", ".jj") or _ignored(then, rel + "/"):
                continue
            yield from _walk(root, now, then, rel, now_ignored or _ignored(now, rel + "/"))
        elif (now_ignored or _ignored(now, rel)) and not _ignored(then, rel):
            yield rel
