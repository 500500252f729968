"""An attribute access shortened: `node.default_value` -> `default_value` once a local holds the value, `key.value`
-> `key`, `node.func.value` -> `node.value`, `args.filename` -> `filename`.

The change is read on the whole dotted name it stands in (the names and dots around it on its line), not on the few
tokens typed: deleting `node.` is the path `node.default_value` becoming `default_value`; the parts both keep at the
end are not the change (`node.func.value` -> `node.value` is `node.func` -> `node`, which `node.func.attr` takes
too). When the new path is the old one with parts left out, the same old path elsewhere, standing as a path of its
own (not after another `.`), becomes the same new path, as a rename would: the user stopped reaching through the
object, there as here. A path that gains parts (`x` -> `x.z`) or becomes another name (`ma.missing` -> `Ellipsis`)
is not one of these: the same text elsewhere need not change.

Plain strings in, plain values out; synthesis.py asks here when it learns a change.
"""
from __future__ import annotations

import re

from tabd.daemon.edits.tokens import spread

_PATH = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
_MAX = 120  # characters: a longer dotted name is no path a user retypes


def learned(before: str, after: str, start: int, old_end: int, new_end: int) -> tuple[str, str, int] | None:
    """(the old path, the new one, where the old one starts in `before`) when the change of before[start:old_end]
    into after[start:new_end] (one line) shortens the dotted name it stands in by leaving parts out; else None."""
    if "\n" in before[start:old_end] or "\n" in after[start:new_end]:
        return None
    run = spread(before, after, start, old_end, new_end, _in_path)
    if run is None:
        return None
    a, old, new = run
    while old.endswith(".") and new.endswith("."):  # a dot typed next: not part of the path yet
        old, new = old[:-1], new[:-1]
    if old.startswith(".") or _PATH.fullmatch(old) is None or _PATH.fullmatch(new) is None or len(old) > _MAX:
        return None  # (a path that hangs off an expression, `f().x.y`, is that expression's)
    parts, kept = old.split("."), new.split(".")
    while len(kept) > 1 and parts[-1] == kept[-1]:
        parts, kept = parts[:-1], kept[:-1]  # `node.func.value` -> `node.value` is `node.func` -> `node`
    if not len(kept) < len(parts) or not _within(kept, parts):
        return None
    return ".".join(parts), ".".join(kept), a


def _in_path(text: str, i: int) -> bool:
    return text[i].isalnum() or text[i] in "_."


def _within(kept: list[str], parts: list[str]) -> bool:
    """`kept` is `parts` with some left out, in order."""
    rest = iter(parts)
    return all(any(p == k for p in rest) for k in kept)
