"""Restore (contract 7, docs/DESIGN.md): byte-exact trees, a pre-restore checkpoint that undoes
the restore, another worktree, refusals, and serialisation with captures."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from durability.backends.git import forget
from durability.config import Settings
from durability.store import Store
from tests.helpers import (
    GatedJj,
    cli,
    commit_manifest,
    jj,
    make_git_repo,
    make_jj_repo,
    ping,
    run_cli,
    run_cli_json,
    start_service,
    tree_manifest,
    wait_for,
)

RUN = "run-rst"
NON_ASCII = "données-ünïcødé-файл.txt"


def _snap(repo: Path) -> dict[str, Any]:
    result: dict[str, Any] = run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n")
    return result


def _restore(*extra: str, env: dict[str, str] | None = None,
             process: bool = False) -> dict[str, Any]:
    done = (cli if process else run_cli)("restore", RUN, "--node", "n", "--json", *extra, env=env)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _state_one(repo: Path) -> None:
    rng = random.Random(7)
    (repo / "bin").mkdir()
    (repo / "bin" / "blob.bin").write_bytes(bytes(rng.randrange(256) for _ in range(70_000))
                                            + b"\x00\x00tail")
    tool = repo / "bin" / "tool.sh"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    (repo / "empty.txt").write_bytes(b"")
    deep = repo / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "deep.txt").write_text("deep\n")
    (repo / "link-to-deep").symlink_to("a/b/c/deep.txt")
    (repo / "dangling").symlink_to("does/not/exist")
    (repo / NON_ASCII).write_text("unicode ✓\n", encoding="utf-8")
    (repo / "日本語").mkdir()
    (repo / "日本語" / "ファイル.bin").write_bytes(b"\x00\x01\x02\xff")
    (repo / "doomed.txt").write_text("deleted later\n")
    (repo / "no-newline").write_bytes(b"last line without newline")


def _state_two(repo: Path) -> None:
    (repo / "bin" / "blob.bin").write_bytes(b"\x00" * 10 + os.urandom(1000))
    (repo / "bin" / "tool.sh").chmod(0o644)  # loses its executable bit
    (repo / "empty.txt").write_text("no longer empty\n")
    (repo / "link-to-deep").unlink()
    (repo / "link-to-deep").symlink_to(NON_ASCII)  # retargeted
    (repo / "doomed.txt").unlink()
    (repo / "a" / "b" / "c" / "deep.txt").unlink()
    (repo / "a" / "b" / "c").rmdir()
    (repo / "a" / "b" / "c").write_text("a folder became a file\n")
    (repo / "README.md").unlink()
    (repo / "new-exec").write_text("#!/bin/sh\n")
    (repo / "new-exec").chmod(0o755)


def _state_three(repo: Path) -> None:
    (repo / NON_ASCII).unlink()
    (repo / "no-newline").write_bytes(b"")
    (repo / "dangling").unlink()
    (repo / "dangling").write_text("was a symlink\n")


def _three_states(repo: Path) -> list[dict[str, Any]]:
    """Capture seq 1 and 2; leave the tree in a third, uncaptured state."""
    manifests = []
    for change in (_state_one, _state_two, _state_three):
        change(repo)
        manifests.append(tree_manifest(repo))
        if change is not _state_three:
            assert _snap(repo)["seq"] == len(manifests)
    return manifests


def test_restore_is_byte_exact_and_undoable(repo: Path, settings: Settings) -> None:
    one, two, three = _three_states(repo)
    assert one != two != three
    assert commit_manifest(repo, _checkpoint(settings, 1).commit_id) == one

    done = _restore("--seq", "1")
    assert done["worktree"] == str(repo.resolve())
    assert done["restored"] == {"seq": 1, "commit_id": _checkpoint(settings, 1).commit_id}
    assert done["pre_restore"]["seq"] == 3  # the uncaptured third state, saved first
    assert tree_manifest(repo) == one
    pre = _checkpoint(settings, 3)
    assert (pre.source, pre.commit_id) == ("pre-restore", done["pre_restore"]["commit_id"])
    assert commit_manifest(repo, pre.commit_id) == three

    undo = _restore("--seq", "3")
    assert tree_manifest(repo) == three
    assert undo["pre_restore"]["seq"] == 4  # the restored tree, saved before undoing
    assert _restore("--seq", "2")["pre_restore"]["seq"] == 5
    assert tree_manifest(repo) == two


def test_restore_of_an_unchanged_tree_dedups_its_pre_restore(
    repo: Path, settings: Settings
) -> None:
    _state_one(repo)
    _snap(repo)
    _state_two(repo)
    latest = _snap(repo)
    done = _restore("--seq", "1")
    assert (done["pre_restore"]["seq"], done["pre_restore"]["commit_id"]) == (
        2, latest["commit_id"])
    assert len(_rows(settings)) == 2  # no row for a pre-restore equal to the latest
    _restore("--seq", "2")
    assert _rows(settings)[-1].seq == 3  # the restored seq-1 tree was new, so saved


def test_default_is_the_latest_seq_of_the_latest_attempt(repo: Path) -> None:
    _state_one(repo)
    _snap(repo)
    (repo / "attempt2.txt").write_text("second attempt\n")
    run_cli_json("snapshot", str(repo), "--run", RUN, "--node", "n", "--attempt", "2")
    want = tree_manifest(repo)
    _state_two(repo)
    done = _restore()
    assert done["restored"]["seq"] == 1
    assert tree_manifest(repo) == want
    assert (repo / "attempt2.txt").exists()


def test_restore_into_another_worktree(tmp_path: Path, settings: Settings) -> None:
    main = make_jj_repo(tmp_path / "main", colocate=False)
    _state_one(main)
    _snap(main)
    want = tree_manifest(main)
    jj(main, "workspace", "add", "--no-colocate", "--name", "other", str(tmp_path / "other"))
    other = tmp_path / "other"
    (other / "local.txt").write_text("only here\n")
    done = _restore("--seq", "1", "--worktree", str(other))
    assert done["worktree"] == str(other.resolve())
    assert tree_manifest(other) == want
    assert tree_manifest(main) == want  # the original is untouched
    pre = _rows(settings)[-1]
    assert pre.source == "pre-restore" and pre.worktree == str(other.resolve())
    assert "local.txt" in commit_manifest(other, pre.commit_id)


def test_refusals(repo: Path, tmp_path: Path) -> None:
    _snap(repo)
    before = tree_manifest(repo)
    for args in (("--seq", "9"), ("--attempt", "4")):
        done = run_cli("restore", RUN, "--node", "n", *args)
        assert done.returncode == 3 and done.stdout == ""
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("durability: not-found: ")
    done = run_cli("restore", "no-such-run", "--node", "n")
    assert done.returncode == 3 and "not-found" in done.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    done = run_cli("restore", RUN, "--node", "n", "--worktree", str(plain))
    assert done.returncode == 5 and ("not-a-jj-repo" in done.stderr
                                     or "not-a-repo" in done.stderr)
    done = run_cli("restore", "../../x", "--node", "n")
    assert done.returncode == 2 and "invalid-value" in done.stderr
    assert tree_manifest(repo) == before


def test_a_restore_and_service_captures_never_interleave(
    repo: Path, tmp_path: Path, settings: Settings
) -> None:
    _state_one(repo)
    _snap(repo)
    _state_two(repo)
    second = _snap(repo)
    # Hold the restore's first jj call (its pre-restore snapshot, taken under
    # the worktree lock): restores write files themselves, never `jj restore`.
    gated = GatedJj(tmp_path / "gated", only="log")
    service = start_service(tmp_path)
    try:
        with ThreadPoolExecutor(2) as pool:
            gated.close()
            # Processes: the restore and the capture race for the worktree
            # lock as a user's shell and a harness do (and the in-process
            # runner swaps one process's streams: one call at a time).
            restoring = pool.submit(_restore, "--seq", "1", process=True,
                                    env={**os.environ, "DURABILITY_JJ": str(gated.path)})
            gated.wait_held()  # the restore holds the worktree lock, nothing written yet
            hook = pool.submit(cli, "snapshot", str(repo), "--run", RUN, "--node", "n",
                               "--json")
            # The service has begun that capture (the only one it has run: the
            # snapshots above were in-process) and waits for the lock.
            wait_for(lambda: (ping(settings.socket_path) or {}).get("captures") == 1,
                     timeout=60)
            assert not hook.done()
            gated.open()
            done = restoring.result(120)
            captured = hook.result(120)
    finally:
        gated.open()
        service.stop()
    assert captured.returncode == 0, captured.stderr
    answer = json.loads(captured.stdout)
    assert done["pre_restore"]["seq"] == 2 == second["seq"]
    # Taken after the restore: the restored tree, as a new seq.
    assert answer["seq"] == 3 and not answer["deduped"]
    assert commit_manifest(repo, answer["commit_id"]) == tree_manifest(repo)
    assert tree_manifest(repo) == commit_manifest(repo, _checkpoint(settings, 1).commit_id)


def _rows(settings: Settings) -> list[Any]:
    with Store(settings.database) as store:
        return store.checkpoints(RUN)


def _checkpoint(settings: Settings, seq: int) -> Any:
    (row,) = [r for r in _rows(settings) if r.seq == seq]
    return row


# -- a restore that cannot succeed ------------------------------------------------


@pytest.fixture
def two_repos(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A colocated jj repository and an unrelated plain git repository."""
    jrepo = make_jj_repo(tmp_path / "jrepo").resolve()
    (jrepo / "j.txt").write_text("jj side\n")
    grepo = make_git_repo(tmp_path / "grepo").resolve()
    (grepo / "g.txt").write_text("git side\n")
    yield jrepo, grepo
    forget(grepo)


@pytest.mark.parametrize("source_kind", ["jj", "git"])
def test_restore_into_a_repository_without_the_commit_records_nothing(
    two_repos: tuple[Path, Path], settings: Settings, source_kind: str
) -> None:
    """A restore that cannot succeed (the checkpoint's commit is not in the
    target worktree's repository) must refuse before its pre-restore capture:
    otherwise the attempt gains a row for a foreign worktree, its jj_pointer
    moves there, and the next default restore goes to the wrong repository."""
    jrepo, grepo = two_repos
    source, other = (jrepo, grepo) if source_kind == "jj" else (grepo, jrepo)
    run_cli_json("snapshot", str(source), "--run", RUN, "--node", "n")
    rows_before = _rows(settings)
    pointer_before = [a.jj_pointer for a in Store(settings.database).attempts(RUN)]
    files_before = tree_manifest(other)
    done = run_cli("restore", RUN, "--node", "n", "--worktree", str(other))
    assert done.returncode == 5 and done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(("durability: git-failed: ", "durability: jj-failed: "))
    assert _rows(settings) == rows_before
    assert [a.jj_pointer for a in Store(settings.database).attempts(RUN)] == pointer_before
    assert tree_manifest(other) == files_before
