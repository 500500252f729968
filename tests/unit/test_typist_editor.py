"""Typing as VS Code does: the editor buffer's rules (sessions/editor.py), the typist that reconciles them with the
file (sessions/vscode_typist.py), and what replay's simulated user reads from such events (typed_ahead)."""
from __future__ import annotations

import random
import sysconfig
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabd.daemon.sessions import pystrings
from tabd.daemon.sessions.editor import Buffer, majority_eol, with_eol
from tabd.daemon.sessions.format import apply_change, parse_session, dumps_event, header
from tabd.daemon.sessions.replayer import acceptable, typed_ahead
from tabd.daemon.sessions.typist import Span, TypingStyle, typed_session
from tabd.daemon.sessions.vscode_typist import file_events

SAMPLES = Path(__file__).resolve().parents[2] / "predictor" / "samples"
URI = "file:///w/a.py"
STEADY = TypingStyle(typo_rate=0.0, think_rate=0.0)


def at_end(text: str) -> Buffer:
    """A buffer with the cursor at the end of its first line."""
    b = Buffer(text)
    b.cursor = b.line_end(0)
    return b


def typed(b: Buffer, keys: str) -> list:
    return [b.type(ch) for ch in keys]


def final(events) -> str:
    doc = None
    for e in events:
        if e["op"] == "open":
            doc = e["text"]
        elif e["op"] == "change":
            doc = apply_change(doc, e["range"], e["text"])
    return doc


# ---------------------------------------------------------------- the editor's rules


def test_an_opening_bracket_inserts_the_pair_with_the_cursor_between():
    b = at_end("x = \ny = 2\n")
    edit = typed(b, "f(")[-1]
    event = edit.event(1.0, URI)
    assert event["text"] == "()" and event["range"]["start"] == {"line": 0, "character": 5}
    assert event["cursor"] == {"line": 0, "character": 6}  # between, not after: the session says so
    assert b.text == "x = f()\ny = 2\n"
    assert "cursor" not in typed(b, "a")[0].event(1.1, URI)  # a plain key leaves the cursor after its text


def test_typing_the_closer_it_inserted_moves_over_it_and_changes_nothing():
    b = at_end("x = \n")
    typed(b, "f(a")
    edit = b.type(")")
    assert edit.op == "move" and b.text == "x = f(a)\n"
    assert edit.event(2.0, URI) == {"t": 2.0, "op": "move", "uri": URI, "position": {"line": 0, "character": 8}}


def test_a_closer_the_editor_did_not_insert_is_typed_not_overtyped():
    b = at_end("x = )\n")
    b.cursor = 4  # before a `)` that was in the file
    assert b.type(")").op == "change" and b.text == "x = ))\n"
    c = at_end("x = \n")
    typed(c, "f(a")
    assert c.type("]").op == "change" and c.text == "x = f(a])\n"  # not the closer there: no overtype


def test_backspace_between_an_auto_closed_pair_deletes_both_and_otherwise_one():
    b = at_end("x = \n")
    b.type("[")
    event = b.backspace().event(0.0, URI)
    assert event["range"] == {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 6}}
    assert event["text"] == "" and b.text == "x = \n"
    typed(b, "(a")
    b.backspace()
    assert b.text == "x = ()\n"  # the a
    b.type(")")  # overtyped: the cursor is past the pair now
    b.backspace()
    assert b.text == "x = (\n"


def test_enter_between_brackets_puts_the_closer_on_its_own_line():
    b = at_end("    call\nnext\n")
    b.type("(")
    event = b.enter("whatever").event(0.0, URI)
    assert event["text"] == "\n        \n    "
    assert event["cursor"] == {"line": 1, "character": 8}
    assert b.text == "    call(\n        \n    )\nnext\n"
    plain = at_end("    x = 1\n")
    assert plain.enter("    ").text == "\n    "  # elsewhere, the auto-indent asked for


@pytest.mark.parametrize("before, key, closes", [
    ("x = ", '"', True),
    ("x = ", "'", True),
    ("don", "'", False),          # after a word character
    ("x = 1", '"', False),
    ("print(f", '"', True),       # the f" pair: no word rule
    ('s = "abc', "'", False),     # inside a string
    ('s = "abc', "(", True),      # brackets close anywhere
    ("x = 1  # see ", '"', True),  # " is only kept out of strings
    ("x = 1  # see ", "'", False),  # ' out of comments too
    ("x = 1  # f", '"', False),   # and so is the prefixed pair
    ('x = ""', '"', False),       # right after a string (its closing quote): the third of a triple quote
])
def test_quotes_close_as_vscode_decides(before, key, closes):
    b = at_end(before + "\n")
    edit = b.type(key)
    assert (edit.text == key * 2 if key in "'\"" else edit.text == "()") is closes


@pytest.mark.parametrize("after, key, closes", [
    ("", "(", True), (")", "(", True), (",", "(", True), ("x", "(", False), ("'", "(", True),
    (",", '"', True), ("x", '"', False), ("'", '"', False), ("]", '"', True),
])
def test_pairs_close_only_before_autoclosebefore_characters(after, key, closes):
    b = Buffer("x = " + after + "\n")
    b.cursor = 4
    assert (len(b.type(key).text) == 2) is closes


def test_a_triple_quote_typed_a_key_at_a_time_opens_a_docstring():
    b = at_end("    \n")
    kinds = [b.type('"').op for _ in range(3)]
    assert kinds == ["change", "move", "change"] and b.text == '    """\n'
    typed(b, 'Doc."""')
    assert b.text == '    """Doc."""\n'


def test_positions_count_utf16_units_and_a_wide_closer_is_overtyped_whole():
    b = Buffer("s = 😀\n", pairs={"⟨": "𝄞"})
    b.cursor = b.line_end(0)
    edit = b.type("⟨")
    assert edit.start == {"line": 0, "character": 6}  # the emoji is two units
    assert edit.cursor == {"line": 0, "character": 7}
    move = b.type("𝄞")
    assert move.op == "move" and move.cursor == {"line": 0, "character": 9}  # past both units of the closer
    assert b.text == "s = 😀⟨𝄞\n"


def test_a_crlf_document_keeps_its_line_breaks_and_mixed_ones_take_the_majority():
    assert majority_eol("a\r\nb\r\nc\n") == "\r\n" and majority_eol("a\r\nb\nc\n") == "\n"
    assert majority_eol("a\rb\rc\n") == "\r\n"  # a lone \r counts as a CR break, as VS Code counts it
    b = at_end("x = 1\r\ny = 2\r\n")
    assert b.eol == "\r\n" and b.enter("").text == "\r\n"
    assert b.position(b.cursor) == {"line": 1, "character": 0}
    mixed = Buffer("a\r\nb\nc\n")
    assert mixed.text == "a\nb\nc\n"


def test_the_string_scanner_finds_strings_comments_and_docstrings():
    assert pystrings.scan("", 'x = "a')[1] == pystrings.STRING
    assert pystrings.scan("", 'x = "a" + ')[1] == pystrings.CODE
    assert pystrings.scan("", "x = 1  # it")[1] == pystrings.COMMENT
    assert pystrings.scan("", '"#" + ')[1] == pystrings.CODE
    assert pystrings.scan("", r'"a\"b')[1] == pystrings.STRING
    state = pystrings.state_after("", '    """Doc\n')
    assert state == '"""' and pystrings.scan(state, "    more ")[1] == pystrings.STRING
    assert pystrings.state_after("", "x = 'a\n") == ""  # a short string ends with its line


# ---------------------------------------------------------------- the typist


SNIPPET = '''def f():
    pass


def g(a, b):
    x = foo(
        a,
        b,
    )
    y = bar(baz(a,
                b))
    s = f"it's {a!r}" + 'q'
    return call(x,
        y)
'''


def snippet_events(text: str = SNIPPET, spans=(Span(5, 12, "body"),), seed: int = 0, style=STEADY):
    events, _ = file_events(text, URI, "python", list(spans), random.Random(seed), style)
    return events


def test_the_typist_overtypes_goes_down_past_the_closer_line_and_deletes_what_the_file_lacks():
    events = snippet_events()
    assert final(events) == SNIPPET
    changes = [e for e in events if e["op"] == "change"]
    moves = [e for e in events if e["op"] == "move"]
    assert any(e["text"] == "\n        \n    " for e in changes), "Enter between foo( and its )"
    # after `b,` the editor's `)` is on the next line, where the file has it: one move down past it
    assert {"line": 8, "character": 5} in [m["position"] for m in moves]
    # `baz(a,` / `b))`: both closers overtyped, one after the other
    assert [m["position"] for m in moves].count({"line": 10, "character": 18}) == 1
    # `call(x,` ends the span: the `)` the editor put there is not the file's next line: deleted
    last = changes[-1]
    assert last["text"] == "" and last["range"]["start"] == {"line": 12, "character": 18}
    assert last["range"]["end"] == {"line": 12, "character": 19}


def test_a_closer_typed_where_the_editor_put_its_own_further_on_deletes_the_doubled_one():
    text = "x = 1\ny = call(\n    a)\nz = 2\n"
    events = snippet_events(text, [Span(1, 2, "block")])
    assert final(events) == text
    deletes = [e for e in events if e["op"] == "change" and e["text"] == "" and e["range"]["start"] != e["range"]["end"]]
    assert len(deletes) == 1  # the `\n)` Enter between brackets left below
    assert deletes[0]["range"]["start"] == {"line": 2, "character": 6}


def test_a_mistyped_bracket_is_one_pair_inserted_and_one_pair_deleted():
    text = "x = 1\ny = [1, (2)]\n"
    events = snippet_events(text, [Span(1, 1, "line")], style=TypingStyle(typo_rate=1.0, think_rate=0.0))
    assert final(events) == text
    pair_deletes = [e for e in events if e["op"] == "change" and e["text"] == ""
                    and e["range"]["end"]["character"] - e["range"]["start"]["character"] == 2]
    assert len(pair_deletes) == 2  # the wrong bracket before each of [ and (


def stdlib_files(count: int, seed: int) -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.glob("*.py") if 2_000 < p.stat().st_size < 60_000)
    return random.Random(seed).sample(files, min(count, len(files)))


@pytest.mark.parametrize("path", [*sorted(SAMPLES.glob("*.py")), *stdlib_files(6, 29)], ids=lambda p: p.name)
def test_the_typed_document_is_the_file(path):
    raw = path.read_bytes().decode("utf-8")
    for seed in (0, 1, 2):
        _, events = typed_session([str(path)], seed=seed, spans=4, editor="vscode")
        assert final(events) == raw


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def test_crlf_mixed_and_non_bmp_files_are_typed_to_the_file(tmp_path):
    body = ('def greet(name):\n    s = f"héllo {name} 😀"\n    return (s, {"🎉": [1, 2]})\n\n\n'
            'def other():\n    return greet("x")\n')
    crlf = _write(tmp_path, "crlf.py", body.replace("\n", "\r\n"))
    mixed = _write(tmp_path, "mixed.py", body.replace("\n", "\r\n", 3))  # 3 of 7 breaks carry \r: \n wins
    for path, eol in ((crlf, "\r\n"), (mixed, "\n")):
        raw = path.read_bytes().decode("utf-8")
        for seed in range(4):
            _, events = typed_session([str(path)], seed=seed, spans=3, editor="vscode")
            assert events[0]["text"].count(eol) == events[0]["text"].count("\n")
            assert final(events) == with_eol(raw, eol)
    assert final(typed_session([str(crlf)], seed=0, spans=3, editor="vscode")[1]) == crlf.read_bytes().decode()


def test_a_pair_closed_at_the_end_of_the_file_is_reconciled(tmp_path):
    path = _write(tmp_path, "eof.py", 'x = 1\nprint(x, "end"')  # no final newline: the editor's ) sits at the end
    _, events = typed_session([str(path)], seed=0, spans=1, editor="vscode")
    assert final(events) == path.read_text()
    assert any(e["op"] == "change" and e["text"] == "()" for e in events)


def test_vscode_and_plain_sessions_retype_the_same_spans_of_every_file():
    files = [str(p) for p in sorted(SAMPLES.glob("*.py"))] + [str(p) for p in stdlib_files(2, 3)]
    _, plain = typed_session(files, seed=5, editor="plain")
    _, vscode = typed_session(files, seed=5, editor="vscode")
    opened = lambda events: [e["text"] for e in events if e["op"] == "open"]  # noqa: E731
    assert opened(plain) == opened(vscode)
    assert [e for e in plain if e["op"] == "move"] == [] and any(e["op"] == "move" for e in vscode)
    times = [e["t"] for e in vscode]
    assert times == sorted(times)


lines_of_code = st.lists(st.text(alphabet='abf (){}[]"\',:=#\\😀é\t', max_size=30), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(lines=lines_of_code, indents=st.lists(st.sampled_from(["", "    ", "        "]), min_size=6, max_size=6),
       seed=st.integers(0, 3), crlf=st.booleans())
def test_any_text_is_typed_to_itself(lines, indents, seed, crlf):
    body = [indent + line for indent, line in zip(indents, lines)]
    text = "\n".join(["head = 1", *body, "tail = 2", ""])
    if crlf:
        text = text.replace("\n", "\r\n")
    events = snippet_events(text, [Span(1, len(body), "block")], seed=seed, style=TypingStyle(typo_rate=0.3))
    assert final(events) == text


# ---------------------------------------------------------------- what the simulated user types next


def test_typed_ahead_holds_back_what_the_editor_put_after_the_cursor():
    events = snippet_events("x = 1\ny = f(a)\n", [Span(1, 1, "line")])
    keys = [e for e in events if e["op"] in ("change", "move")]
    start = {"line": 0, "character": 5}
    ahead, boundaries = typed_ahead(keys, 0, URI, start)
    assert ahead == "\ny = f(a)"
    pair = next(i for i, e in enumerate(keys) if e["text"] == "()")
    # no boundary while the editor's `)` is ahead of the cursor: "\ny = f(a" alone would drop it
    assert len("\ny = f(") not in boundaries and len("\ny = f(a") not in boundaries
    assert boundaries[len("\ny = f")] == pair and boundaries[len(ahead)] == len(keys)
    assert acceptable("\ny = f(a)", ahead, boundaries) == (len(ahead), False)
    assert acceptable("\ny = f(a", ahead, boundaries, words=False) == (0, False)
    # from inside the pair, the `)` was there before: passing it is no typing
    inside = advance_to(keys, pair)
    assert typed_ahead(keys, pair + 1, URI, inside)[0] == "a"


def advance_to(keys, index):
    return keys[index]["cursor"]


def test_session_text_with_moves_and_cursors_parses_and_replays_to_the_file():
    events = snippet_events()
    lines = [dumps_event(header("python"))] + [dumps_event(e) for e in events]
    session = parse_session(lines, "mem")
    assert not session.warnings and session.events == events
    assert session.keystrokes() == sum(e["op"] in ("change", "move") for e in events) > session.changes()


def test_every_keystroke_is_a_place_to_accept_with_what_the_editor_holds_after_the_cursor():
    """The simulated user may take a suggestion that ends inside a pair the editor would have closed: the replay keeps
    the editor's `)` after the cursor, so the document stays the recorded one and the `)` costs the key it cost."""
    from tabd.daemon.sessions.replayer import ahead_with_held

    events = snippet_events("x = 1\ny = f(a)\n", [Span(1, 1, "line")])
    keys = [e for e in events if e["op"] in ("change", "move")]
    ahead, stops = ahead_with_held(keys, 0, URI, {"line": 0, "character": 5})
    assert ahead == "\ny = f(a)"
    assert stops[len("\ny = f(")][1] == ")" and stops[len("\ny = f(a")][1] == ")"
    assert stops[len(ahead)] == (len(keys), "")
    strict = typed_ahead(keys, 0, URI, {"line": 0, "character": 5})[1]
    assert strict == {n: i for n, (i, held) in stops.items() if not held}
