"""A local import hoisted to the module's top: `import warnings` added at the top of the file, then deleted from one
test method that imported it for itself; the same line in the other methods is due to go too.

The deleted line must be one Python import statement, indented (inside a body), and the module's top level must now
hold that same statement: the import the body no longer needs stands above it. Each place is that statement on a
line of its own, indented, deleted with its line; none once the top-level import is gone again. (imports.py is the
other way round: a local import added at the top of each function that uses it.)

Plain strings in, plain values out; synthesis.py asks here when it learns a change, and for its places.
"""
from __future__ import annotations

import re

from tabd.daemon.edits import blocks

_IMPORT = re.compile(r"(?:import [\w.]+(?: as \w+)?(?:, [\w.]+(?: as \w+)?)*"
                     r"|from \.*[\w.]* import \w+(?: as \w+)?(?:, \w+(?: as \w+)?)*)")


def learned(before: str, after: str, start: int, old_end: int, new_end: int, filename: str) -> str | None:
    """The import statement, when before[start:old_end] deleted (nothing written, after[start:new_end] empty) is one
    whole indented line holding that one statement, and `after`'s top level imports the same; else None."""
    deleted = before[start:old_end]
    if new_end != start or deleted.count("\n") != 1 or len(deleted) > 200 or not blocks.python(filename):
        return None
    line = _whole_line(before, after, start, old_end)
    if line is None:
        return None
    statement = line.strip()
    if not line[:1].isspace() or _IMPORT.fullmatch(statement) is None:
        return None
    return statement if _at_top(after, statement) else None


def _whole_line(before: str, after: str, start: int, old_end: int) -> str | None:
    """The line whose deletion, line break and all, turns `before` into `after` (a diff may slide the deleted text
    across the indentation it shares with the next line: `import x\n    ` for `    import x\n`); None when none."""
    for at in (start, old_end - 1):
        first = before.rfind("\n", 0, at) + 1
        end = before.find("\n", at)
        if end >= 0 and len(before) - len(after) == end + 1 - first and before[:first] + before[end + 1:] == after:
            return before[first:end]
    return None


def places(text: str, statement: str) -> list[tuple[int, int]]:
    """Where that statement stands on an indented line of its own, as the range that deletes the line (its line break
    before it included), in text order; none when the module's top level no longer imports it."""
    if not _at_top(text, statement):
        return []
    found = re.finditer(r"\n[ \t]+" + re.escape(statement) + r"[ \t]*(?=\n|\Z)", text)
    return [(m.start(), m.end()) for m in found]


def _at_top(text: str, statement: str) -> bool:
    return re.search(r"(?m)^" + re.escape(statement) + r"[ \t]*$", text) is not None
