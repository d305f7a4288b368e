"""The code cites the project's own definitions (docs/SCIENCE.md, under a section anchor), never a
document outside the repository nor an issue tracker number; every cited anchor exists."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIENCE = ROOT / "docs" / "SCIENCE.md"
SKIP_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    "build",
    "dist",
}
SELF = Path(__file__).resolve()

# ``SPEC`` is also the name of each dashboard page's URL-state object (``SPEC = PageState(...)``):
# those uses are code, every other ``SPEC`` is a citation of a document that is not here.
SPEC_AS_CODE = re.compile(
    r"\bSPEC\s*=|\bSPEC\.(?:decode|encode|defaults|value|from_dict)\b|spec=SPEC\b|\"SPEC\"|import SPEC\b|\bSPEC as\b"
    r"|\(SPEC,|\bSPEC, BINDS\b|\.SPEC\b"
)
SPEC_WORD = re.compile(r"\bSPEC\b")
OUTSIDE_DOCS = re.compile(r"SPEC\.md|\bSPEC\s*§|\bSPEC\s+[\"“]|\bMEASURED\b|ARCHITECTURE(?:\.md|\s*[\"“])|\.\./shared/")
ISSUE = re.compile(r"\bissues?\s*#?\d+|#\d+\s+issue\b", re.IGNORECASE)
CITED_ANCHOR = re.compile(r"SCIENCE\.md#([\w-]+)")
LOCAL_ANCHOR = re.compile(r"\]\(#([\w-]+)\)")


def _files() -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = Path(dirpath).relative_to(ROOT)
        dirnames[:] = [
            d
            for d in dirnames
            if d not in SKIP_DIRS
            and not d.endswith(".egg-info")
            and not (rel.parts[:2] == ("tests", "fixtures") and d == "data")
        ]
        out += [Path(dirpath) / f for f in filenames if f.endswith((".py", ".md")) and (Path(dirpath) / f) != SELF]
    return sorted(out)


def _lines():
    for path in _files():
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            yield f"{path.relative_to(ROOT)}:{i}", line


def github_slug(heading: str) -> str:
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def science_anchors() -> set[str]:
    text = SCIENCE.read_text(encoding="utf-8")
    anchors = set(re.findall(r"""<a\s+(?:id|name)=["']([^"']+)["']""", text))
    seen: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            slug = github_slug(m.group(1))
            n = seen.get(slug, 0)
            anchors.add(slug if n == 0 else f"{slug}-{n}")
            seen[slug] = n + 1
    return anchors


def test_the_walk_sees_code_tests_and_docs():
    files = {p.relative_to(ROOT).as_posix() for p in _files()}
    assert {"docs/SCIENCE.md", "science/patching.py", "tests/test_patching.py", "README.md"} <= files


def test_no_citation_of_documents_outside_the_repository():
    bad = [
        f"{where}: {line.strip()}"
        for where, line in _lines()
        if OUTSIDE_DOCS.search(line) or len(SPEC_WORD.findall(line)) > len(SPEC_AS_CODE.findall(line))
    ]
    assert not bad, "cite docs/SCIENCE.md#<anchor> instead:\n" + "\n".join(bad)


def test_no_issue_numbers():
    bad = [f"{where}: {line.strip()}" for where, line in _lines() if ISSUE.search(line)]
    assert not bad, "say what the code does and why, not which issue asked for it:\n" + "\n".join(bad)


def test_every_cited_science_anchor_exists():
    anchors = science_anchors()
    cited = [(where, a) for where, line in _lines() for a in CITED_ANCHOR.findall(line)]
    cited += [
        (f"docs/SCIENCE.md:{i}", a)
        for i, line in enumerate(SCIENCE.read_text(encoding="utf-8").splitlines(), 1)
        for a in LOCAL_ANCHOR.findall(line)
    ]
    assert cited, "the code cites docs/SCIENCE.md sections"
    missing = [f"{where}: #{a}" for where, a in cited if a not in anchors]
    assert not missing, "anchors missing from docs/SCIENCE.md:\n" + "\n".join(missing)


def test_github_slugs():
    assert (
        github_slug("Training recipe (`TrainParams`, `science/training.py`)")
        == "training-recipe-trainparams-sciencetrainingpy"
    )
    assert github_slug('<a id="x"></a>START token') == "start-token"
