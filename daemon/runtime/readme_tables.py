"""The settings reference's tables of flags and initialization options, written from the settings table (runtime/settings.py).

docs/settings.md marks each table with `<!-- settings:NAME -->` ... `<!-- /settings:NAME -->`;
`python -m tabd.daemon.runtime.readme_tables docs/settings.md` rewrites what is between the marks, and
tests/unit/test_settings.py fails when the page says something the table does not.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from tabd.daemon.runtime.settings import CONTEXT, MODEL, SERVE, SETTINGS, Setting

JSON_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                               tuple: "array of strings"}


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def flag_cell(row: Setting) -> str:
    """How the flag is written: `--depth K`, `--device auto|cpu|cuda`, `--no-cache`."""
    if row.type is bool:
        return f"`{row.flag}`"
    argument = "|".join(row.spec.choices) if row.spec.choices else row.spec.metavar or row.dest.upper()
    return cell(f"`{row.flag} {argument}`")


def flag_default(row: Setting) -> str:
    if row.type is bool:
        return "off"  # a switch is off unless given
    return f"`{row.default}`" if row.spec.choices else row.shown_default


# The docs/ page that holds each section a setting's `see` names (the tables live in docs/settings.md).
SEE_PAGES = {"Content exclusion": "privacy.md", "Next-edit suggestions": "protocol.md",
             "Remote engines": "engines.md", "The engine": "engines.md",
             "Speculation that follows what you accept": "how-it-works.md", "Suggestion quality": "quality.md"}


def see_link(heading: str) -> str:
    if heading not in SEE_PAGES:
        raise KeyError(f"no docs/ page is known for the section {heading!r}: add it to SEE_PAGES")
    return f"see [{heading}]({SEE_PAGES[heading]}#{anchor(heading)})"


def meaning(row: Setting, with_span: bool = True) -> str:
    """The row's help, then its bounds and a link to the section that says more."""
    see = see_link(row.spec.see) if row.spec.see else ""
    notes = "; ".join(n for n in (row.span("–") if with_span else "", see) if n)
    return cell(row.spec.help + (f" ({notes})" if notes else ""))


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def flag_rows(group: str) -> list[str]:
    lines = ["| flag | default | meaning |", "|---|---|---|"]
    for row in SETTINGS:
        if not row.spec.flag or row.spec.group != group:
            continue
        lines.append(f"| {flag_cell(row)} | {flag_default(row)} | {meaning(row)} |")
        if row.spec.off_flag:
            lines.append(f"| `{row.spec.off_flag}` | off | {cell(row.spec.off_help)} |")
    return lines


def init_default(row: Setting) -> str:
    """The default as JSON writes it, where it has one of its own (else as --help says it)."""
    if row.spec.shown is None and row.default is not None:
        if row.type is bool:
            return "`true`" if row.default else "`false`"
        if row.type is str:
            return f'`"{row.default}"`'
    return row.shown_default


def init_rows() -> list[str]:
    lines = ["| option | type | default | range | flag (or meaning) |", "|---|---|---|---|---|"]
    for row in SETTINGS:
        if not row.spec.init:
            continue
        kind = JSON_TYPES[row.type] + (" or null" if row.optional else "")
        allowed = ", ".join(row.spec.choices) if row.spec.choices else row.span("–")
        flag = f"`{row.flag}`" if row.spec.flag else meaning(row, with_span=False)
        lines.append(f"| `{row.spec.init}` | {kind} | {init_default(row)} | {cell(allowed)} | {flag} |")
    return lines


def markdown_tables() -> dict[str, str]:
    """name -> the table docs/settings.md shows between its `settings:name` marks."""
    return {"model": "\n".join(flag_rows(MODEL)), "context": "\n".join(flag_rows(CONTEXT)),
            "serve": "\n".join(flag_rows(SERVE)), "init": "\n".join(init_rows())}


def marked(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- settings:{name} -->)\n.*?(<!-- /settings:{name} -->)", re.S)


def with_tables(readme: str) -> str:
    """readme (the page's text) with each marked table rewritten; KeyError naming a table whose marks are missing."""
    for name, table in markdown_tables().items():
        pattern = marked(name)
        if not pattern.search(readme):
            raise KeyError(f"the page has no <!-- settings:{name} --> ... <!-- /settings:{name} --> marks")
        readme = pattern.sub(lambda m: f"{m.group(1)}\n{table}\n{m.group(2)}", readme)
    return readme


def main(argv: list[str]) -> int:
    path = Path(argv[0] if argv else "docs/settings.md")
    path.write_text(with_tables(path.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
