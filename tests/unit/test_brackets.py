"""An opening bracket changed to another kind (brackets.py): the bracket that closes it is the next edit, as a real
history made it (#44: humanize's test parameters, `(...)` made `[...]`, one list after another)."""
from __future__ import annotations

import pytest

from tabd.daemon.edits import propagation
from tabd.daemon.edits.history import DocHistory

pytestmark = pytest.mark.unit

TEXT = ('@pytest.mark.parametrize(\n    "locale, expected",\n    (\n        ("ru_RU", ")"),\n'
        '        ("fr_FR", f(2)),\n    ),\n)\ndef test_one(locale, expected):\n    assert (locale) != expected\n')


def proposed_after(text: str, old: str, new: str, at: int) -> tuple[str, str, str] | None:
    """(the line the proposal stands on, what it replaces, what with) after `old` at `at` was typed over as `new`."""
    history = DocHistory()
    assert text[at:at + len(old)] == old
    history.edited(at, old, new, 100.0)
    text = text[:at] + new + text[at + len(old):]
    p = propagation.propose(text, list(history.groups), at + len(new), 105.0, "m.py")
    if p is None:
        return None
    line_start = text.rfind("\n", 0, p.start) + 1
    return text[line_start:text.find("\n", line_start)], text[p.start:p.end], p.text


def test_a_tuple_opened_as_a_list_is_closed_as_one_at_its_own_closer_not_a_nested_one_or_a_string():
    at = TEXT.index("    (\n") + 4
    # not the `)` in the string, not the inner tuples' or f(2)'s: the one that closed the `(` now typed over
    assert proposed_after(TEXT, "(", "[", at) == ("    ),", ")", "]")

