"""What the jj backend's swapped-folder check (``jj.check_swapped``) opens:
the folders of what the snapshot changed since the last snapshot it passed,
not every folder the working-copy commit holds since its parent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from durability.backends.confined import ConfinedTree
from durability.backends.jj import JjBackend, find_jj
from tests.helpers import jj_path, make_jj_repo

FOLDERS = 40


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real: Callable[[ConfinedTree, str], int] = ConfinedTree.dir_fd

    def dir_fd(self: ConfinedTree, folder: str) -> int:
        opened.append(folder)
        return real(self, folder)

    monkeypatch.setattr(ConfinedTree, "dir_fd", dir_fd)
    return opened


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = make_jj_repo(tmp_path / "jrepo").resolve()
    for i in range(FOLDERS):
        (path / f"d{i:02}" / "sub").mkdir(parents=True)
        (path / f"d{i:02}" / "sub" / "f.txt").write_text(f"{i}\n")
    return path


def _backend() -> JjBackend:
    return JjBackend(find_jj({"DURABILITY_JJ": jj_path()}), timeout_s=120)


def test_the_check_opens_only_what_changed_since_the_last_snapshot(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = _backend()
    backend.snapshot(root)  # every folder is new to the working-copy commit
    (root / "d07" / "sub" / "f.txt").write_text("changed\n")
    (root / "new").mkdir()
    (root / "new" / "g.txt").write_text("g\n")
    opened = _spy(monkeypatch)
    backend.snapshot(root)
    assert sorted(set(opened)) == ["d07/sub", "new"]
    opened.clear()
    backend.snapshot(root)  # nothing changed: nothing to open
    assert opened == []


def test_without_a_readable_last_snapshot_the_parent_is_the_baseline(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A baseline naming no commit of the store (forged, another store) is
    not trusted: the check falls back to everything since the parent."""
    backend = _backend()
    backend.snapshot(root)
    (root / ".jj" / "durability").mkdir(exist_ok=True)
    (root / ".jj" / "durability" / "swap-checked").write_text("0" * 40 + "\n")
    (root / "d07" / "sub" / "f.txt").write_text("changed\n")
    opened = _spy(monkeypatch)
    backend.snapshot(root)
    assert {f"d{i:02}/sub" for i in range(FOLDERS)} <= set(opened)
