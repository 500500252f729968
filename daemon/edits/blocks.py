"""Indented blocks read from plain text, for the edits that know Python's statements (imports.py, reraise.py,
aliases.py, decorators.py, scopes.py): which files are Python, the line that opens the block a line stands in, and a
line's indentation."""
from __future__ import annotations

_PYTHON = (".py", ".pyi")


def python(filename: str) -> bool:
    """Whether the file is Python source or a stub, by its name (the edits that know its statements apply there)."""
    return filename.endswith(_PYTHON)


def header(text: str, at: int, indent: int) -> tuple[int, int] | None:
    """The nearest line above the one that holds `at` that holds something and is indented less than `indent`
    characters (the `def`, `except` or `if` line that opens its block, or its last line), as (start, end) with its
    line break past the end; None at the top level."""
    end = text.rfind("\n", 0, at) + 1
    while end > 0:
        start = text.rfind("\n", 0, end - 1) + 1
        line = text[start:end - 1]
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            return start, end
        end = start
    return None


def indent_of(text: str, at: int) -> str:
    """The whitespace the line that holds `at` begins with, up to `at`."""
    start = text.rfind("\n", 0, at) + 1
    line = text[start:at]
    return line[:len(line) - len(line.lstrip())]
