"""The README is a front door and every relative link of the documentation resolves.

- ``README.md`` has at most 200 lines and opens with the two commands, ``make demo`` then ``make test`` (``.ci/run``
  runs ``make test``, "the README's test command"); depth lives in ``docs/``.
- Every relative link in ``README.md`` and ``docs/*.md`` names an existing file, and a ``#anchor`` into a Markdown
  file (the same file for a bare ``#anchor``) names one of its headings, slugged as GitHub does: lower case, each
  space a ``-``, punctuation other than ``-`` and ``_`` dropped, ``-1``, ``-2``, ... appended to repeated slugs.

Links inside fenced code blocks and inline code are text, not links. External links (``https:``, ``mailto:``) are
not fetched.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
MAX_README_LINES = 200
DOCUMENTS = [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line) of every line outside fenced code blocks."""
    lines: list[tuple[int, str]] = []
    fence: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = _FENCE.match(line)
        if match and (fence is None or match.group(1) == fence):
            fence = match.group(1) if fence is None else None
        elif fence is None:
            lines.append((number, line))
    return lines


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading's text: markup removed (code ticks, emphasis, a link's target), lower
    case, every character but letters, digits, ``_``, ``-`` and spaces dropped, then each space a ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](target) -> text
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, repeated slugs numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if not match:
            continue
        slug = github_slug(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def relative_links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every link in ``path`` that is not external (no scheme)."""
    links: list[tuple[int, str]] = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for match in _LINK.finditer(_INLINE_CODE.sub("", line)):
            target = match.group(1)
            if not _SCHEME.match(target):
                links.append((number, target))
    return links


def broken_links(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """``file:line: target: why`` for every relative link of ``path`` that does not resolve (paths relative to
    ``root``)."""
    problems: list[str] = []
    where = path.relative_to(root)
    for number, target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{where}:{number}: {target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{where}:{number}: {target}: no heading #{anchor} in {linked.relative_to(root)}")
    return problems


def test_the_readme_is_a_front_door_of_at_most_200_lines() -> None:
    # GIVEN the README / WHEN its lines are counted / THEN depth has gone to docs/
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move depth into docs/"


def test_the_readme_opens_with_make_demo_then_make_test() -> None:
    # GIVEN the README's first code block
    text = README.read_text(encoding="utf-8")
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]

    # WHEN its commands are read / THEN the two commands come first, in that order
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands[:2] == ["make demo", "make test"]
    # AND nothing but the title comes before that block
    assert text.index("```bash\n") == text.index("\n") + 2


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(path: Path) -> None:
    # GIVEN a document of the README and docs/ / WHEN each relative link is followed
    # THEN its file exists and its #anchor, into a Markdown file, is one of that file's headings
    assert broken_links(path) == []


def test_the_slugs_are_githubs(tmp_path: Path) -> None:
    # GIVEN headings with code, punctuation, arrows and a repeat (negative control: a missing anchor and file)
    doc = tmp_path / "doc.md"
    doc.write_text(
        "## Configuration (`jobs/<job>/job.toml` and `query.sql`; `cdk.json` → `context.stack`)\n"
        "## --dry-run, --yes and exit codes\n"
        "```bash\n# 1. not a heading\n[x](missing.md)\n```\n"
        "## Limits\n## Limits\n"
        "[a](#configuration-jobsjobjobtoml-and-querysql-cdkjson--contextstack) [b](#--dry-run---yes-and-exit-codes)"
        " [c](#limits-1) `[d](#in-code)`\n"
        "[e](#limits-2) [f](doc.md#nowhere) [g](gone.md) [h](https://example.com/#x)\n",
        encoding="utf-8",
    )
    # WHEN its anchors and links are checked / THEN exactly the three broken links are named
    assert anchors(doc) == {
        "configuration-jobsjobjobtoml-and-querysql-cdkjson--contextstack",
        "--dry-run---yes-and-exit-codes",
        "limits",
        "limits-1",
    }
    problems = [problem.split(": ", 1)[1] for problem in broken_links(doc, root=tmp_path)]
    assert problems == [
        "#limits-2: no heading #limits-2 in doc.md",
        "doc.md#nowhere: no heading #nowhere in doc.md",
        "gone.md: no such file",
    ]
