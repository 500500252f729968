"""The next-edit walk's lexing (daemon/edits/tokens.py): each request reads a document that differs from the last
one in a few lines, so its tokens are spliced from the last one's, and the lines it learns from are lexed alone
between those reads without taking the last document's place (they once did: every request's document was then
lexed whole, 75% of the event loop's time in a replay of a typed session)."""
from __future__ import annotations

from tabd.daemon.edits import synthesis
from tabd.daemon.edits import tokens as lexing

PLACES = [60, 170, 290, 410, 530]  # functions far apart, on lines that hold no string


def _document(made: int) -> str:
    """600 functions, some with a docstring; the first `made` of PLACES changed (`x + i` -> `x + y`)."""
    out = []
    for i in range(600):
        body = "x + y" if i in PLACES[:made] else f"x + {i}"
        out.append(f"def f{i}(x):\n" + ('    """Add."""\n' if i % 50 == 0 else "") + f"    return {body}\n\n")
    return "".join(out)


def test_a_request_s_document_is_spliced_from_the_last_one_after_the_lines_learned_from(monkeypatch):
    whole: list[int] = []
    lexed = lexing._lexed

    def counting(text: str, alias: str):
        if len(text) > lexing.SPLICE_CHARS:
            whole.append(len(text))
        return lexed(text, alias)

    monkeypatch.setattr(lexing, "_lexed", counting)
    lexing._cache.clear()
    lexing._recent.clear()
    for made in range(1, len(PLACES) + 1):  # one request after each change, learning from each change made so far
        now = _document(made)
        spliced = [(t.start, t.text, t.kind) for t in lexing.tokens_of(now, "m.py")]  # as the first learn() reads it
        assert spliced == [(t.start, t.text, t.kind) for t in lexed(now, lexing._language("m.py"))]
        for undone in PLACES[:made]:
            before = now.replace(f"def f{undone}(x):\n    return x + y", f"def f{undone}(x):\n    return x + {undone}")
            t = synthesis.learn(before, now, "m.py")
            assert t is not None and t.new  # `{undone}` -> `y`, learned at each place
    assert whole == [len(_document(1))]  # the first request's document only
