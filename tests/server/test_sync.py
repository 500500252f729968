"""Exact document sync, property-tested against a reference model.

Random incremental edits over text full of what breaks position arithmetic
(CRLF, LF and lone CR; emoji and other surrogate pairs; CJK; combining marks;
form feed, U+0085, U+2028/9 and \\x1c, which str.splitlines treats as line
breaks and LSP does not), at line ends, past them, inside surrogate pairs and at
the document's end. First lsp/documents.py directly (thousands of examples),
then through a real `tabd serve`: after every didChange, `tabd/document` must
equal the reference, with UTF-16 positions and with UTF-8 negotiated.
"""
from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tabd.lsp.documents import Document, DocumentError
from tabd.lsp.positions import Text, line_starts
from support.rawserver import RawServer

# -- the reference model: LSP's rules written the slow, obvious way ----------------------------

PIECES = ["a", "b", "x", " ", "\t", "\n", "\r", "\r\n", "😀", "𝄞", "中", "文", "é", "e\u0301", "\u0301",
          "\f", "\u2028", "\u2029", "\u0085", "\x1c", "\x0b", ""]
text_st = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


def units(ch: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(ch.encode("utf-8"))
    if encoding == "utf-32":
        return 1
    return len(ch.encode("utf-16-le")) // 2


def ref_lines(text: str) -> list[tuple[int, str]]:
    """(start offset, content without terminator) per line; LSP breaks only at \\r\\n, \\r and \\n."""
    lines, start = [], 0
    for m in re.finditer(r"\r\n|\r|\n", text):
        lines.append((start, text[start:m.start()]))
        start = m.end()
    lines.append((start, text[start:]))
    return lines


def ref_offset(text: str, line: int, character: int, encoding: str) -> int:
    lines = ref_lines(text)
    if line >= len(lines):
        return len(text)  # past the last line: the document's end
    start, content = lines[line]
    used = 0
    for i, ch in enumerate(content):
        if used + units(ch, encoding) > character:
            return start + i  # inside a character (a surrogate pair, a UTF-8 sequence): its start
        used += units(ch, encoding)
    return start + len(content)  # past the line's end: the line's end


def ref_apply(text: str, change: dict, encoding: str) -> str:
    if "range" not in change:
        return change["text"]
    r = change["range"]
    a = ref_offset(text, r["start"]["line"], r["start"]["character"], encoding)
    b = ref_offset(text, r["end"]["line"], r["end"]["character"], encoding)
    if b < a:
        return text  # a reversed range is skipped (and logged) by the server
    return text[:a] + change["text"] + text[b:]


@st.composite
def position_st(draw, text: str, encoding: str) -> dict:
    lines = ref_lines(text)
    line = draw(st.integers(0, len(lines)))  # one past the last line too
    width = sum(units(c, encoding) for c in lines[line][1]) if line < len(lines) else 0
    character = draw(st.one_of(st.integers(0, width + 2), st.just(width), st.integers(0, 10_000)))
    return {"line": line, "character": character}


@st.composite
def change_st(draw, text: str, encoding: str) -> dict:
    new = draw(text_st)
    if draw(st.integers(0, 15)) == 0:
        return {"text": new}  # a whole-document change
    p, q = draw(position_st(text, encoding)), draw(position_st(text, encoding))
    if draw(st.integers(0, 9)) > 0 and ref_offset(text, q["line"], q["character"], encoding) < ref_offset(text, p["line"], p["character"], encoding):
        p, q = q, p  # mostly valid ranges; sometimes reversed ones
    return {"range": {"start": p, "end": q}, "text": new}


@st.composite
def session_st(draw, encoding: str, max_edits: int = 8):
    """(initial text, [changes per didChange notification]) with each change drawn against the text it applies to."""
    text = draw(text_st)
    start, notifications = text, []
    for _ in range(draw(st.integers(1, max_edits))):
        batch = []
        for _ in range(draw(st.integers(1, 3))):
            change = draw(change_st(text, encoding))
            batch.append(change)
            text = ref_apply(text, change, encoding)
        notifications.append(batch)
    return start, notifications


# -- lsp/documents.py directly -------------------------------------------------------------------


def apply_to(doc: Document, change: dict, encoding: str) -> None:
    if "range" not in change:
        doc.apply(None, None, change["text"], encoding)
        return
    r = change["range"]
    try:
        doc.apply((r["start"]["line"], r["start"]["character"]), (r["end"]["line"], r["end"]["character"]), change["text"], encoding)
    except DocumentError:
        pass  # reversed range: skipped, as the reference does


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_document_apply_matches_the_reference(encoding, data):
    start, notifications = data.draw(session_st(encoding))
    block_lines = data.draw(st.sampled_from([1, 2, 3, 128]))  # small blocks: edits across block boundaries
    doc, text = Document("file:///t.py", Text(start, block_lines), 1, ""), start
    for batch in notifications:
        for change in batch:
            apply_to(doc, change, encoding)
            text = ref_apply(text, change, encoding)
            assert doc.text == text
            assert doc.content.all_line_starts() == [0] + line_starts(text)  # incremental line starts stay exact
            doc.content._joined = None  # read the blocks themselves, not the small-text copy
            assert doc.text == text


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
@settings(max_examples=500, deadline=None)
@given(text=text_st, data=st.data())
def test_offsets_and_positions_round_trip_and_clamp(encoding, text, data):
    codec = encoding
    doc = Document("file:///t.py", Text(text, data.draw(st.sampled_from([1, 2, 128]))), 1, "")
    p = data.draw(position_st(text, encoding))
    offset = doc.offset_at(p["line"], p["character"], codec)
    assert offset == ref_offset(text, p["line"], p["character"], encoding)
    line, character = doc.position_at(offset, codec)
    assert doc.offset_at(line, character, codec) == offset  # a clamped position is a real one
    lines = ref_lines(text)
    assert line == min(p["line"], len(lines) - 1) or p["line"] >= len(lines)
    for o in range(len(text) + 1):
        assert doc.offset_at(*doc.position_at(o, codec), codec) == o or text[o - 1: o + 1] == "\r\n"


def test_known_clamps():
    codec = "utf-16"
    doc = Document.new("u", "a😀b\r\nx\u2028y\fz\rend", 1)
    assert doc.offset_at(0, 2, codec) == 1  # inside the surrogate pair: the emoji's start
    assert doc.offset_at(0, 3, codec) == 2
    assert doc.offset_at(0, 99, codec) == 3  # past the line's end: before \r\n
    assert doc.offset_at(1, 4, codec) == doc.text.index("z")  # U+2028 and \f are not line breaks
    assert doc.offset_at(2, 0, codec) == doc.text.index("end")  # a lone \r is one
    assert doc.offset_at(9, 9, codec) == len(doc.text)
    with pytest.raises(DocumentError):
        doc.offset_at(-1, 0, codec)


# -- a real server -----------------------------------------------------------------------------

_uris = itertools.count()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    made = {}

    def get(encoding: str) -> RawServer:
        if encoding not in made:
            s = RawServer("--no-speculation", stderr=tmp_path_factory.mktemp("sync") / f"stderr-{encoding}.txt")
            result = s.initialize(encodings=[encoding] if encoding != "utf-16" else None)
            assert result["capabilities"].get("positionEncoding", "utf-16") == encoding
            made[encoding] = s
        return made[encoding]

    yield get
    for s in made.values():
        assert s.proc.poll() is None, "the server died under the property test"
        s.close()


def through_server(server: RawServer, start: str, notifications: list[list[dict]], encoding: str) -> None:
    uri = f"file:///sync/{next(_uris)}.py"
    server.open(uri, start)
    text, version = start, 1
    try:
        for batch in notifications:
            version += 1
            server.change(uri, version, batch)
            for change in batch:
                text = ref_apply(text, change, encoding)
            got = server.document(uri)
            assert (got["text"], got["version"]) == (text, version), batch
    finally:
        server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_server_document_matches_the_reference(servers, encoding, data):
    start, notifications = data.draw(session_st(encoding))
    through_server(servers(encoding), start, notifications, encoding)


@pytest.mark.slow
def test_server_edge_cases(servers):
    s = servers("utf-16")
    cases = [
        ("", [[{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "😀"}]]),
        ("a\r\nb", [[{"range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 1}}, "text": "\r"}],
                    [{"range": {"start": {"line": 0, "character": 1}, "end": {"line": 1, "character": 0}}, "text": ""}]]),
        ("x\r", [[{"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}}, "text": "\nq"}]]),
        ("😀😀", [[{"range": {"start": {"line": 0, "character": 1}, "end": {"line": 0, "character": 3}}, "text": "z"}]]),
        ("a\u2028b\fc", [[{"range": {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 5}}, "text": "C"}]]),
        ("end", [[{"range": {"start": {"line": 7, "character": 0}, "end": {"line": 9, "character": 9}}, "text": "!"}]]),
    ]
    for start, notifications in cases:
        through_server(s, start, notifications, "utf-16")


@pytest.mark.slow
def test_bench_bigdoc_measures_both_documents_through_lsp():
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "tabd.daemon", "bench", "bigdoc", "--json", "--bigdoc-lines", "3000",
                          "--bigdoc-rounds", "3"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout)["bigdoc"]
    assert report["big"]["lines"] == 3000 and report["small"]["lines"] == 300
    assert report["ratio_p50"] > 0
    assert report["sources"]["cache"] >= 2 * 2 * 3  # every counted request is a cache hit: document work, not the model
