"""Every citation in the repository resolves inside it (docs/architecture.md §4.9).

A citation is `docs/NAME.md §N.M` (in a page under docs/, also `NAME.md §N.M`): the page must
exist and have a heading numbered N.M. A bare `§N.M` refers to the page cited last before it in
the same file, or, in a page under docs/, to that page itself. Documents that were never part of
the repository must not be cited at all, and relative Markdown links must point at real files.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".sh", ".txt", ".j2", ".tpl", ".cfg"}
NAMES = {"Makefile", "Dockerfile", "run"}  # run: .ci/run
SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist"}
KEPT_HIDDEN = {".ci"}

# Names of documents that live outside the repository, and the phrasings that cited them.
OUT_OF_REPO = re.compile(
    r"\bDESIGN\.md|house[- ]style|simulator-calibration|local-control-plane|container-image\.md"
    r"|scheduler ref(?:erence|\.)|(?<![\w/.-])reference/|(?<![\w-])calibration (?:§|alpha|beta)"
)
# Our vLLM pages cited by bare name from outside docs/ (they resolve only as docs/NAME.md).
BARE_PAGE = re.compile(r"(?<![\w/.-])vllm-0\.33(?:-scheduler)?\.md")
NUM = r"\d+(?:\.\d+)*"
CITATION = re.compile(
    rf"(?P<doc>(?<![\w/.-])(?:[\w.-]+/)*[\w.-]+\.md)`?\]?\s*"
    rf"(?P<secs>§\s?{NUM}(?:\s*(?:,|and|-|\u2013)\s*§?\s?{NUM})*)"
)
SECTION = re.compile(rf"§\s?({NUM})")
RANGE_END = re.compile(rf"(?:-|\u2013)\s*§?\s?({NUM})")
DOC_MENTION = re.compile(r"(?<![\w/.-])docs/[\w.-]+\.md")
MD_LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+\.md)(?:#[^)]*)?\)")
HEADING = re.compile(rf"^#{{1,6}}\s+({NUM})\.?\s", re.M)


def scanned_files(root: Path) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).parts
        if any(p in SKIP_DIRS or p.endswith(".egg-info") for p in rel):
            continue
        if any(p.startswith(".") and p not in KEPT_HIDDEN for p in rel):
            continue
        if path.is_file() and (path.suffix in SUFFIXES or path.name in NAMES):
            yield path


@functools.cache
def headings(page: Path) -> set[str]:
    return set(HEADING.findall(page.read_text(encoding="utf-8")))


def resolve(doc: str, path: Path, root: Path) -> Path | None:
    for base in (root, path.parent):
        candidate = (base / doc).resolve()
        if candidate.is_file():
            return candidate
    return None


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def name_problems(text: str, path: Path, root: Path, in_docs: bool) -> Iterator[tuple[int, str]]:
    """Documents cited by name that are not in the repository, and dead Markdown links."""
    for m in OUT_OF_REPO.finditer(text):
        yield m.start(), f"cites {m.group()!r}, which is not in the repository"
    if not in_docs:
        for m in BARE_PAGE.finditer(text):
            yield m.start(), f"write docs/{m.group()}: a bare page name does not resolve here"
    for m in DOC_MENTION.finditer(text):
        if not (root / m.group()).is_file():
            yield m.start(), f"{m.group()} does not exist"
    if path.suffix == ".md":
        for m in MD_LINK.finditer(text):
            if not (path.parent / m.group(1)).resolve().is_file():
                yield m.start(), f"link target {m.group(1)} does not exist"


def section_problems(text: str, path: Path, root: Path, in_docs: bool) -> Iterator[tuple[int, str]]:
    """Cited sections that the cited (or implied) page does not have."""
    cited: list[tuple[int, Path, list[str]]] = []  # (position, page, section numbers)
    spans: list[tuple[int, int]] = []
    for m in CITATION.finditer(text):
        page = resolve(m.group("doc"), path, root)
        if page is None:
            yield m.start(), f"cites {m.group('doc')}, which is not in the repository"
            continue
        secs = SECTION.findall(m.group("secs")) + RANGE_END.findall(m.group("secs"))
        cited.append((m.start(), page, secs))
        spans.append(m.span("secs"))
    for m in SECTION.finditer(text):
        if any(start <= m.start() < end for start, end in spans):
            continue
        before = [page for pos, page, _ in cited if pos < m.start()]
        if not in_docs and not before:
            yield m.start(), f"bare §{m.group(1)} with no docs/ page cited before it"
            continue
        cited.append((m.start(), path if in_docs else before[-1], [m.group(1)]))
    for pos, page, secs in cited:
        for sec in secs:
            if sec not in headings(page):
                yield pos, f"{page.relative_to(root).as_posix()} has no section {sec}"


def problems_in(path: Path, root: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    rel = path.relative_to(root).as_posix()
    in_docs = rel.startswith("docs/") and path.suffix == ".md"
    found = [
        *name_problems(text, path, root, in_docs),
        *section_problems(text, path, root, in_docs),
    ]
    return [f"{rel}:{line_of(text, pos)}: {what}" for pos, what in sorted(found)]


def find_problems(root: Path) -> list[str]:
    here = Path(__file__).resolve()
    root = root.resolve()
    return [
        problem
        for path in scanned_files(root)
        if path.resolve() != here
        for problem in problems_in(path, root)
    ]


def test_every_citation_in_the_repository_resolves() -> None:
    problems = find_problems(ROOT)
    assert not problems, "\n".join(problems)


def test_the_vllm_pages_exist_with_their_numbered_sections() -> None:
    assert {"1.2", "1.3", "1.4", "2.2", "2.3", "3.2", "3.3", "3.4"} <= headings(
        ROOT / "docs" / "vllm-0.33.md"
    )
    assert {"0.1", "1.2", "1.3", "2.4", "2.5", "3", "4", "5", "6.2", "8.3"} <= headings(
        ROOT / "docs" / "vllm-0.33-scheduler.md"
    )
    assert {"2.1", "2.2", "2.3", "2.4", "3"} <= headings(ROOT / "docs" / "twin-calibration.md")


PAGE = "# Page\n\n## 1. One\n\n### 1.2 Two\n\n## 3. Three\n"


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("# docs/page.md §1.2, §3 and §1", None),
        ("# docs/page.md §1.2\n# later: §3, §1.2-1.2", None),
        ("# docs/page.md §1.3", "docs/page.md has no section 1.3"),
        ("# docs/page.md §1-§4", "docs/page.md has no section 4"),
        ("# docs/page.md §1\n# then §1.3", "docs/page.md has no section 1.3"),
        ("# see §1.2", "bare §1.2 with no docs/ page cited before it"),
        ("# docs/gone.md §1", "cites docs/gone.md, which is not in the repository"),
        ("# see docs/gone.md", "docs/gone.md does not exist"),
        ("# page.md §1.2", "cites page.md, which is not in the repository"),
        ("# vllm-0.33.md §1.2", "write docs/vllm-0.33.md"),
        ("# the three layers (DESIGN.md)", "cites 'DESIGN.md'"),
        ("# labels (house-style §3)", "cites 'house-style'"),
        ("# scheduler reference §6", "cites 'scheduler reference'"),
        ("# (calibration alpha2)", "cites 'calibration alpha'"),
    ],
)
def test_a_broken_citation_is_reported(tmp_path: Path, source: str, problem: str | None) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(PAGE)
    (tmp_path / "mod.py").write_text(source + "\n")
    problems = find_problems(tmp_path)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) >= 1 and all(p.startswith("mod.py:") for p in problems), problems
        assert any(problem in p for p in problems), problems


def test_pages_under_docs_resolve_bare_sections_and_links_against_themselves(
    tmp_path: Path,
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text(PAGE + "\nSee §1.2 and [other](other.md).\n")
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n[page.md §3](page.md), and §2.\n")
    assert find_problems(tmp_path) == ["docs/other.md:3: docs/other.md has no section 2"]
