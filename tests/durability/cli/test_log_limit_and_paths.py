"""The review's leftovers of issue 11: ``log`` shows the newest 50 entries
unless told otherwise; a dry run lists its paths in its documented order
whatever order the plan came in; ``restore --path`` and ``diff -- PATHS``
read a relative path the same way (from the current folder inside the
worktree, like git; from the worktree's root outside it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from durability.backends import Changes
from durability.backends.git import forget
from durability.cli.inspect import LOG_LIMIT
from durability.cli.restore_output import preview_dict, preview_lines
from durability.config import Settings
from durability.restore.apply import Preview
from durability.store import Checkpoint, Gap, Store
from tests.helpers import make_git_repo, make_jj_repo, run_cli, run_cli_json

RUN = "run-left"


def _with_gaps(tmp_path: Path, settings: Settings, count: int) -> Path:
    """A git worktree with two checkpoints and ``count`` gaps filed before them."""
    repo = make_git_repo(tmp_path / "repo").resolve()
    with Store(settings.database) as store:
        store.add_gaps(Gap(ts_ms=1_000 + i, run_id=RUN, request_id=f"gap-{i}",
                           reason="jj-failed", worktree=str(repo), detail=f"gap {i}")
                       for i in range(count))
    for i in range(2):
        (repo / "a.txt").write_text(f"{i}\n")
        run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    return repo


@pytest.mark.slow
def test_log_shows_the_newest_50_unless_told(tmp_path: Path, settings: Settings) -> None:
    repo = _with_gaps(tmp_path, settings, LOG_LIMIT + 5)
    try:
        done = run_cli("log", cwd=repo)
        rows = done.stdout.splitlines()[1:]
        assert done.returncode == 0 and len(rows) == LOG_LIMIT == 50
        assert rows[0].split()[4] == "2" and rows[-1].endswith("gap 7")  # newest first
        assert done.stderr == ("durability: the newest 50 entries; older ones: --limit N or "
                               "--all\n")
        every = run_cli("log", "--all", cwd=repo)
        assert len(every.stdout.splitlines()) == 1 + LOG_LIMIT + 7 and every.stderr == ""
        assert every.stdout.splitlines()[-1].endswith("gap 0")
        three = run_cli("log", str(repo), "--limit", "3")
        assert len(three.stdout.splitlines()) == 4 and "--limit N or --all" in three.stderr
        as_json = run_cli("log", str(repo), "--json")
        assert len(json.loads(as_json.stdout)) == LOG_LIMIT and as_json.stderr == ""
        assert len(run_cli_json("log", str(repo), "--all")) == LOG_LIMIT + 7
        both = run_cli("log", str(repo), "--limit", "3", "--all")
        assert both.returncode == 2 and both.stderr == ("durability: invalid-value: give "
                                                        "--limit or --all, not both\n")
        # Exactly as many as there are: nothing was left out, no note.
        exact = run_cli("log", str(repo), "--limit", str(LOG_LIMIT + 7))
        assert exact.stderr == "" and len(exact.stdout.splitlines()) == 1 + LOG_LIMIT + 7
    finally:
        forget(repo)


def _preview(changes: Changes) -> Preview:
    target = Checkpoint("r", "n", 0, 1, seq=1, commit_id="c" * 40, change_id=None,
                        operation_id=None, worktree="/w", source="manual", tool_use_id=None,
                        label=None, request_id="q", created_at_ms=0)
    return Preview("/w", target, None, changes)


def test_a_dry_run_lists_writes_then_deletes_then_left_each_by_path() -> None:
    # A plan in no particular order (a backend need not sort).
    seen = _preview(Changes(write=(("z.txt", "create"), ("b/é.txt", "overwrite"),
                                   ("a b.txt", "chmod")),
                            delete=("y.txt", "c/d.txt", "B.txt"),
                            left=(("s", "submodule"), ("m.txt", "outside --path"))))
    assert preview_lines(seen)[1:] == [
        "  chmod      a b.txt", "  overwrite  b/é.txt", "  create     z.txt",
        "  delete     B.txt", "  delete     c/d.txt", "  delete     y.txt",
        "  leave      m.txt  (outside --path)", "  leave      s  (submodule)",
        "3 to write, 3 to delete, 2 left as they are"]
    shape = preview_dict(seen)
    assert [w["path"] for w in shape["write"]] == ["a b.txt", "b/é.txt", "z.txt"]
    assert shape["delete"] == ["B.txt", "c/d.txt", "y.txt"]
    assert [x["path"] for x in shape["left"]] == ["m.txt", "s"]


def _two_files(repo: Path) -> None:
    """x.txt at the root and in sub/, captured, then both edited."""
    (repo / "sub").mkdir()
    (repo / "x.txt").write_text("root v1\n")
    (repo / "sub" / "x.txt").write_text("sub v1\n")
    run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    (repo / "x.txt").write_text("root v2\n")
    (repo / "sub" / "x.txt").write_text("sub v2\n")


@pytest.mark.slow
def test_restore_path_is_relative_to_the_current_folder_inside_the_worktree(
        tmp_path: Path) -> None:
    repo = make_jj_repo(tmp_path / "repo").resolve()
    _two_files(repo)
    sub = repo / "sub"
    # diff and the dry run name the same file for the same words, from sub/.
    names = run_cli("diff", RUN, "--seq", "1", "--worktree", "--name-only", "--", "x.txt", cwd=sub)
    assert names.stdout == "sub/x.txt\n"
    preview = run_cli_json("restore", RUN, "--seq", "1", "--dry-run", "--path", "x.txt", cwd=sub)
    assert (preview["paths"], preview["write"]) == (
        ["sub/x.txt"], [{"path": "sub/x.txt", "how": "overwrite"}])
    done = run_cli_json("restore", RUN, "--seq", "1", "--path", "x.txt", cwd=sub)
    assert done["paths"] == ["sub/x.txt"]
    assert (sub / "x.txt").read_text() == "sub v1\n"
    assert (repo / "x.txt").read_text() == "root v2\n"  # not the root's file
    # `..` climbs from here; `.` is here (the folder, not the whole tree).
    assert run_cli_json("restore", RUN, "--seq", "1", "--path", "../x.txt",
                        cwd=sub)["paths"] == ["x.txt"]
    assert (repo / "x.txt").read_text() == "root v1\n"
    assert run_cli_json("restore", RUN, "--seq", "1", "--path", ".", "--dry-run",
                        cwd=sub)["paths"] == ["sub"]


def test_outside_the_worktree_paths_start_at_its_root(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo").resolve()
    _two_files(repo)
    try:
        names = run_cli("diff", RUN, "--seq", "1", "--worktree", "--name-only", "--", "x.txt",
                        cwd=tmp_path)
        assert names.stdout == "x.txt\n"
        done = run_cli_json("restore", RUN, "--seq", "1", "--path", "x.txt", cwd=tmp_path)
        assert done["paths"] == ["x.txt"] and (repo / "x.txt").read_text() == "root v1\n"
        assert (repo / "sub" / "x.txt").read_text() == "sub v2\n"
        # Climbing out of the worktree from inside it is refused, nothing changed.
        out = run_cli("restore", RUN, "--seq", "1", "--path", "../../x.txt", cwd=repo / "sub")
        assert out.returncode == 2 and out.stderr.startswith("durability: invalid-value: ")
        assert (repo / "sub" / "x.txt").read_text() == "sub v2\n"
    finally:
        forget(repo)
