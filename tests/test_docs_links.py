"""Every relative link in README.md, CONTRIBUTING.md, CHANGELOG.md, every page
under docs/ and bench/RESULTS.md resolves: the file exists and, for a link into
a Markdown page, so does the anchor (a heading, GitHub's way, or an ``<a id>``).
Nothing links outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").rglob("*.md")),
    ROOT / "bench" / "RESULTS.md",
    ROOT / "CHANGELOG.md",
]
# [text](target), not an image; the target has no spaces.
_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*:")


def _prose_lines(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks (code shows, it does not link)."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found = set(re.findall(r'<a id="([^"]+)"', page.read_text()))
    seen: dict[str, int] = {}
    for _, line in _prose_lines(page):
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if heading:
            slug = _slug(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken: list[str] = []
    for number, line in _prose_lines(page):
        for target in _LINK.findall(line):
            if _SCHEME.match(target):
                continue  # a web address: not ours to check offline
            path, _, fragment = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.is_relative_to(root):
                broken.append(f"{number}: {target} points outside the repository")
            elif not where.exists():
                broken.append(f"{number}: {target} does not exist")
            elif fragment and where.suffix == ".md" and fragment not in anchors(where):
                broken.append(f"{number}: {target} has no such anchor")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_and_a_missing_anchor_are_caught(tmp_path: Path) -> None:
    # The check itself can fail: good links pass, and each kind of bad one is named.
    (tmp_path / "OTHER.md").write_text("# Some Heading\n\n<a id=\"contract-1\"></a>\n")
    (tmp_path / "outside.md").write_text("# Outside\n")
    house = tmp_path / "house"
    house.mkdir()
    (tmp_path / "OTHER.md").rename(house / "OTHER.md")
    page = house / "PAGE.md"
    page.write_text(
        "[ok](OTHER.md#some-heading) [ok](OTHER.md#contract-1) [web](https://example.org/x)\n"
        "[gone](MISSING.md) [anchor](OTHER.md#no-such) [out](../outside.md)\n"
        "```\n[in code](ALSO_MISSING.md)\n```\n"
    )
    assert broken_links(page, root=house) == [
        "2: MISSING.md does not exist",
        "2: OTHER.md#no-such has no such anchor",
        "2: ../outside.md points outside the repository",
    ]
