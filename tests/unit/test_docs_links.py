"""The user-facing documents hold together: every relative link in README.md, docs/*.md and editors/*/README.md
names a file that exists and, with an #anchor, a heading that page has (GitHub's anchor rules); the README stays
a README (at most 300 lines, its editor set-up within the first 120)."""
from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 300
EDITOR_SETUP_WITHIN = 120

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", re.I)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "editors").glob("*/README.md"))]


def without_code(text: str) -> str:
    """The text with fenced blocks and code spans blanked (their brackets are not links); line count kept."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0).replace("\n", "")) + "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: the text as rendered (code marks, emphasis and link targets
    dropped), lower case, every character but letters, digits, marks, '-', '_' and spaces dropped, spaces as '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    text = re.sub(r"(\*+|_{2,})(.+?)\1", r"\2", text).lower()
    kept = "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor GitHub gives the page: each heading's slug, a repeat getting -1, -2, ...; and <a name/id>."""
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for match in HEADING.finditer(FENCE.sub("", text)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """'file:line: target (why)' for each relative link in path that does not resolve."""
    text = path.read_text(encoding="utf-8")
    plain = without_code(text)
    targets = [(m.start(), m.group(1)) for m in INLINE_LINK.finditer(plain)]
    targets += [(m.start(), m.group(1)) for m in REFERENCE_DEF.finditer(plain)]
    problems = []
    for offset, target in targets:
        if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, mailto: ...: not ours to check
            continue
        where = f"{path.relative_to(root)}:{plain.count(chr(10), 0, offset) + 1}: {target}"
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{where} (no such file)")
        elif not linked.resolve().is_relative_to(root.resolve()):
            problems.append(f"{where} (outside the repository)")
        elif anchor:
            if linked.suffix != ".md" or linked.is_dir():
                problems.append(f"{where} (an anchor into a file that is not Markdown)")
            elif anchor not in anchors(linked.read_text(encoding="utf-8")):
                problems.append(f"{where} (no heading with that anchor in {linked.relative_to(root.resolve())})")
    return problems


def test_every_relative_link_and_anchor_in_the_readme_and_docs_resolves():
    docs = documents()
    assert len(docs) > 3 and all(p.exists() for p in docs)
    problems = [problem for path in docs for problem in broken_links(path)]
    assert problems == [], "broken links:\n" + "\n".join(problems)


def test_the_readme_is_short_and_shows_editor_set_up_early():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"
    setup = [n for n, line in enumerate(lines, 1) if re.match(r"^#{1,3} Editor set-up\s*$", line)]
    assert setup and setup[0] <= EDITOR_SETUP_WITHIN, f"'Editor set-up' heading at line {setup or None}"


@pytest.mark.parametrize(("heading", "expected"), [
    ("Editor set-up", "editor-set-up"),
    ("`tabd serve`'s own flags", "tabd-serves-own-flags"),
    ("Calibration of `--min-confidence` (2026-12-01)", "calibration-of---min-confidence-2026-12-01"),
    ("llama.cpp", "llamacpp"),
    ("The model's training phases", "the-models-training-phases"),
    ("Prompt-lookup decoding (`tabd bench lookup`, 19:42-19:48, day not recorded)",
     "prompt-lookup-decoding-tabd-bench-lookup-1942-1948-day-not-recorded"),
    ("Why **nothing** shows → [here](x.md)", "why-nothing-shows--here"),
    ("snake_case names", "snake_case-names"),
])
def test_anchors_follow_github_s_rules(heading, expected):
    assert slug(heading) == expected


def test_a_missing_file_a_missing_anchor_and_a_repeated_heading_are_told_apart(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\n## Part\n\n## Part\n\n```\n## Not a heading\n```\n")
    page = tmp_path / "README.md"
    page.write_text("[ok](docs/a.md#part-1) [ok](docs/a.md) [ok](#top) `[code](nowhere.md)`\n"
                    "[gone](docs/b.md) [bad\nanchor](docs/a.md#part-2) [fenced](docs/a.md#not-a-heading)\n"
                    "[web](https://example.com/x#y)\n\n## Top\n")
    problems = broken_links(page, root=tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "docs/b.md (no such file)",
        "docs/a.md#part-2 (no heading with that anchor in docs/a.md)",
        "docs/a.md#not-a-heading (no heading with that anchor in docs/a.md)",
    ]
    assert problems[1].startswith("README.md:2:")
