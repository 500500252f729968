"""A line joined to the one above it, made as two edits (joins.py): the formatter's stub style made by hand, one
overload after another (`) -> bytes:` over `        ...` -> `) -> bytes: ...`), as real histories made it (#44)."""
from __future__ import annotations

import pytest

from tabd.daemon.edits import propagation
from tabd.daemon.edits.history import DocHistory

pytestmark = pytest.mark.unit

OVERLOADS = ('class S:\n'
             '    @overload\n    def unsign(self, value: str) -> bytes:\n        ...\n\n'
             '    def loads(self, value):\n        """Read it.\n\n        Example:\n        ...\n        """\n'
             '        return value\n\n'
             '    @overload\n    def unsign(self, value: bytes) -> tuple[bytes, int]:\n        ...\n\n'
             '    def unsign(self, value):\n        return value\n')


class Typist:
    """The user's edits, one place after another a couple of seconds apart, in a document's history."""

    def __init__(self, text: str) -> None:
        self.text, self.history, self.now = text, DocHistory(), 100.0

    def change(self, at: int, removed: str, inserted: str) -> int:
        assert self.text[at:at + len(removed)] == removed
        self.history.edited(at, removed, inserted, self.now)
        self.text = self.text[:at] + inserted + self.text[at + len(removed):]
        self.now += 2.0
        return at + len(inserted)

    def proposed(self, cursor: int) -> tuple[str, str, str] | None:
        """(the line the proposal starts on, what it replaces, what with), or None."""
        p = propagation.propose(self.text, list(self.history.groups), cursor, self.now + 5.0, "m.py")
        if p is None:
            return None
        line_start = self.text.rfind("\n", 0, p.start) + 1
        return self.text[line_start:self.text.find("\n", line_start)], self.text[p.start:p.end], p.text


def test_a_stub_body_typed_at_its_signature_then_its_line_deleted_goes_on_at_the_next_stub_not_a_docstring():
    user = Typist(OVERLOADS)
    end = user.text.index("-> bytes:") + len("-> bytes:")
    user.change(end, "", " ...")
    cursor = user.change(end + len(" ...") + 1, "        ...\n", "")
    # the next overload's signature, whatever it returns; not the docstring's `Example:` over a `...` line
    assert user.proposed(cursor) == ("    def unsign(self, value: bytes) -> tuple[bytes, int]:", "", " ...")


def test_a_signature_line_lifted_onto_its_stub_body_goes_on_where_the_same_line_stands_over_a_stub():
    def overload(arg: str) -> str:
        return f"@overload\ndef get(\n    {arg},\n) -> Arrow:\n    ...  # pragma: no cover\n\n\n"

    user = Typist(overload("a: int") + "def put(\n    x,\n) -> Arrow:\n    return x\n\n\n" + overload("b: str"))
    at = user.text.index("\n) -> Arrow:")
    user.change(at, "\n) -> Arrow:", "")
    cursor = user.change(at + 1, "   ", ") -> Arrow:")
    assert user.text.startswith("@overload\ndef get(\n    a: int,\n) -> Arrow: ...  # pragma: no cover\n")
    # the next stub's `) -> Arrow:` line; `put`'s, over a body of code, is no stub
    # (the line deleted with the break before it: the proposal starts at the end of the line above)
    assert user.proposed(cursor) == ("    b: str,", "\n) -> Arrow:", "")


def test_text_typed_at_a_line_end_and_another_line_deleted_is_no_join():
    user = Typist(OVERLOADS)
    end = user.text.index("-> bytes:") + len("-> bytes:")
    user.change(end, "", " ...")
    at = user.text.index("        return value\n\n    @overload")
    cursor = user.change(at, "        return value\n", "")  # a line deleted further down: nothing joined
    assert user.proposed(cursor) is None
