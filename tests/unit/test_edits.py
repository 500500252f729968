"""Edit history: a person's keystrokes grouped into the edits the next-edit synthesis learns from (tests/unit/test_synthesis.py
holds the synthesis and the service)."""
from __future__ import annotations

from tabd.daemon.edits.history import GAP_S, DocHistory

TEXT = "def f(count):\n    return count + recount + count_x + self.count\n"


def typed(history: DocHistory, text: str, start: int, removed: int, keys: str, t0: float = 0.0) -> str:
    """Select `removed` characters at start and type `keys` one by one; the text after."""
    history.edited(start, text[start:start + removed], keys[0], t0)
    text = text[:start] + keys[0] + text[start + removed:]
    for i, ch in enumerate(keys[1:], 1):
        history.edited(start + i, "", ch, t0 + 0.1 * i)
        text = text[:start + i] + ch + text[start + i:]
    return text


def test_keystrokes_in_one_place_are_one_group_holding_what_was_there():
    h = DocHistory()
    text = typed(h, TEXT, 6, 5, "total")
    g = h.last
    assert (g.old, text[g.start:g.end]) == ("count", "total") and len(h.groups) == 1
    # a backspace inside the group stays in it
    h.edited(g.end - 1, "l", "", 0.6)
    assert h.last.old == "count" and len(h.groups) == 1


def test_a_pause_or_another_place_starts_a_new_group_and_earlier_ones_shift():
    h = DocHistory()
    text = typed(h, TEXT, 6, 5, "total")
    h.edited(0, "", "# x\n", 0.5 + GAP_S * 2)
    assert len(h.groups) == 2 and h.groups[0].start == 10  # shifted by the 4 characters inserted before it


