"""``durability restore --dry-run``: it lists exactly what the restore then
does (created, overwritten, chmod-ed, replaced, deleted, left), changes no
file, records no checkpoint, and refuses what the restore would refuse.
Real jj and git repositories, the installed CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from durability.config import Settings
from tests.durability.restore.restore_cli import RUN, records, restore, snap, state
from tests.helpers import run_cli


def _checkpoint_state(root: Path) -> None:
    (root / "dir").mkdir()
    (root / "dir" / "edit me.txt").write_text("old\n")
    (root / "dir" / "gone.txt").write_text("deleted later\n")
    (root / "tool.sh").write_text("#!/bin/sh\n")
    (root / "données.txt").write_text("unicode ✓\n", encoding="utf-8")
    (root / "link").symlink_to("tool.sh")
    (root / "was-folder").mkdir()
    (root / "was-folder" / "inner.txt").write_text("inner\n")
    (root / "bin.dat").write_bytes(b"\x00\x01\xff" * 100)


def _later_state(root: Path) -> None:
    (root / "dir" / "edit me.txt").write_text("new\n")
    (root / "dir" / "gone.txt").unlink()
    (root / "tool.sh").chmod(0o755)
    (root / "données.txt").unlink()
    (root / "link").unlink()
    (root / "link").write_text("a file where a link was\n")
    (root / "was-folder" / "inner.txt").unlink()
    (root / "was-folder").rmdir()
    (root / "was-folder").write_text("now a file\n")
    (root / "added.txt").write_text("after the checkpoint\n")


def _dry_run(*args: str) -> dict[str, Any]:
    done = run_cli("restore", RUN, "--node", "n", "--seq", "1", "--dry-run", "--json", *args)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _what_changed(before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
    """Each path the restore changed, and how (the dry run's words)."""
    found: dict[str, str] = {}
    for path in before.keys() | after.keys():
        old, new = before.get(path), after.get(path)
        if old == new:
            continue
        if new is None:
            found[path] = "delete"
        elif old is None:
            found[path] = "create"
        elif old[0] != new[0]:
            found[path] = "replace"
        elif old[2] == new[2] and old[1] != new[1]:
            found[path] = "chmod"
        else:
            found[path] = "overwrite"
    return found


def _listed(preview: dict[str, Any]) -> dict[str, str]:
    listed = {w["path"]: w["how"] for w in preview["write"]}
    listed.update({path: "delete" for path in preview["delete"]})
    return listed


def test_the_dry_run_lists_exactly_what_the_restore_does(work: Path,
                                                         settings: Settings) -> None:
    _checkpoint_state(work)
    checkpoint = snap(work)
    _later_state(work)
    before, recorded = state(work), records(settings)

    preview = _dry_run()

    assert state(work) == before and records(settings) == recorded  # nothing changed
    assert set(preview) == {"dry_run", "worktree", "target", "paths", "write", "delete", "left"}
    assert all(set(w) == {"path", "how"} for w in preview["write"])
    assert preview["dry_run"] is True and preview["paths"] is None
    assert preview["worktree"] == str(work)
    assert preview["target"] == {"seq": 1, "commit_id": checkpoint["commit_id"]}
    assert preview["left"] == []
    assert [w["path"] for w in preview["write"]] == sorted(w["path"] for w in preview["write"])
    done = restore("--seq", "1")
    changed = _what_changed(before, state(work))
    assert _listed(preview) == changed
    assert set(changed.values()) == {"create", "overwrite", "chmod", "replace", "delete"}
    assert (done["written"], done["deleted"]) == (len(preview["write"]), len(preview["delete"]))


def test_a_dry_run_of_some_paths_lists_those_and_what_it_leaves(work: Path) -> None:
    _checkpoint_state(work)
    snap(work)
    _later_state(work)
    before = state(work)

    preview = _dry_run("--path", "dir", "--path", "was-folder")

    assert state(work) == before
    assert preview["paths"] == ["dir", "was-folder"]
    assert _listed(preview) == {"dir/edit me.txt": "overwrite", "dir/gone.txt": "create",
                                "was-folder": "delete", "was-folder/inner.txt": "create"}
    assert preview["left"] == [{"path": p, "why": "outside --path"} for p in
                               sorted(["added.txt", "données.txt", "link", "tool.sh"])]
    restore("--seq", "1", "--path", "dir", "--path", "was-folder")
    assert _listed(preview) == _what_changed(before, state(work))


def test_the_human_dry_run_names_each_path(work: Path, settings: Settings) -> None:
    _checkpoint_state(work)
    snap(work)
    _later_state(work)
    before, recorded = state(work), records(settings)
    done = run_cli("restore", RUN, "--node", "n", "--seq", "1", "--dry-run", "--path", "dir",
                   "--path", "added.txt")
    assert done.returncode == 0 and done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"dry run, nothing changed: restoring {work} at added.txt, dir "
                               "to seq 1 (")
    assert lines[1:] == ["  overwrite  dir/edit me.txt", "  create     dir/gone.txt",
                         "  delete     added.txt",
                         "  leave      données.txt  (outside --path)",
                         "  leave      link  (outside --path)",
                         "  leave      tool.sh  (outside --path)",
                         "  leave      was-folder  (outside --path)",
                         "  leave      was-folder/inner.txt  (outside --path)",
                         "2 to write, 1 to delete, 5 left as they are"]
    assert state(work) == before and records(settings) == recorded


def test_the_dry_run_refuses_what_the_restore_refuses(work: Path, settings: Settings) -> None:
    (work / ".gitignore").write_text("")
    (work / "secret.env").write_text("recorded\n")
    snap(work)  # seq 1 holds secret.env
    (work / ".gitignore").write_text("*.env\n")
    (work / "secret.env").unlink()
    snap(work)
    (work / "secret.env").write_text("unrecorded\n")  # ignored now: no checkpoint holds it
    (work / "README.md").write_text("changed\n")  # so a restore's pre-restore row is new
    before, recorded = state(work), records(settings)
    runs = []
    for extra in (("--dry-run",), ()):
        done = run_cli("restore", RUN, "--node", "n", "--seq", "1", *extra)
        assert done.returncode == 7, done.stderr
        assert done.stderr.startswith("durability: restore-conflict: nothing restored: "
                                      "secret.env: content no checkpoint holds")
        runs.append(len(records(settings)[0]))
    assert state(work) == before
    assert runs == [len(recorded[0]), len(recorded[0]) + 1]  # only the restore took a row
