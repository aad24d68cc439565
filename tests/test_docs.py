"""The README and docs/ link to files and sections that exist: the README is short and points
into docs/, so a moved file or a renamed heading would otherwise leave a dead link."""

from __future__ import annotations

import re
from pathlib import Path

from helpers import REPO_ROOT

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def pages() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())  # a `# comment` in a code block is no heading
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def dead_links(page: Path) -> list[str]:
    dead = []
    for target in LINK.findall(FENCE.sub("", page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            dead.append(f"{target}: no file {file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            dead.append(f"{target}: no heading #{anchor} in {file.name}")
    return dead


def test_readme_and_docs_links_resolve() -> None:
    dead = {p.name: d for p in pages() if (d := dead_links(p))}
    assert dead == {}


def test_readme_links_every_docs_page() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    missing = [p.name for p in (REPO_ROOT / "docs").glob("*.md") if f"](docs/{p.name})" not in readme]
    assert missing == []
