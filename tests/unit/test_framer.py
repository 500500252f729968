"""The LSP transport's framer (lsp/protocol.py) alone: Content-Length frames split anywhere, header variants, broken
headers, wrong lengths, oversize bodies and junk; it never raises and finds the next well-formed message.
(The same through a real `tabd serve`: tests/server/test_transport.py.)
"""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tabd.lsp.protocol import Framer, id_in

from support.rawserver import frame


def messages(frames) -> list:
    return [f.value for f in frames if f.kind == "message"]


def test_framer_reads_well_formed_messages_split_anywhere():
    stream = frame({"a": 1}) + frame({"b": "é" * 10}) + frame({"c": [1, 2]})
    for cut in range(1, len(stream)):
        f = Framer()
        got = messages(f.feed(stream[:cut]) + f.feed(stream[cut:]))
        assert got == [{"a": 1}, {"b": "é" * 10}, {"c": [1, 2]}], cut


@pytest.mark.parametrize("header", [
    b"content-length: %d\r\n\r\n",  # lower case
    b"Content-Length:%d\r\n\r\n",  # no space
    b"Content-Length: %d\n\n",  # bare LF
    b"Content-Length:   %d  \r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n",  # the other order
])
def test_framer_accepts_header_variants(header):
    body = json.dumps({"x": 1}).encode()
    f = Framer()
    frames = f.feed(header % len(body) + body + frame({"y": 2}))
    assert messages(frames) == [{"x": 1}, {"y": 2}]
    assert all(fr.kind == "message" and not fr.note for fr in frames)  # nothing to warn about


@pytest.mark.parametrize("bad", [
    b"Content-Length: abc\r\n\r\n{\"x\": 1}",  # not a number
    b"Content-Length: -5\r\n\r\n{\"x\": 1}",  # negative
    b"Content-Lenght: 8\r\n\r\n{\"x\": 1}",  # misspelt
    b"\r\n\r\n{\"x\": 1}",  # no header at all
    b"garbage line\r\n",
    b"Content-Length: 99999999999999999999\r\n\r\n",  # absurd
])
def test_framer_recovers_the_next_message_after_a_broken_header(bad):
    f = Framer()
    frames = f.feed(bad + frame({"next": True}))
    assert messages(frames)[-1] == {"next": True}


def test_framer_understated_and_overstated_lengths():
    body = json.dumps({"id": 7, "method": "m"}).encode()
    f = Framer()
    frames = f.feed(b"Content-Length: %d\r\n\r\n" % (len(body) - 3) + body + frame({"next": 1}))
    assert [fr.kind for fr in frames][0] == "invalid" and id_in(frames[0].head) == 7
    assert messages(frames)[-1] == {"next": 1}
    f = Framer()
    frames = f.feed(b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body + frame({"next": 2}) + frame({"n": 3}))
    assert messages(frames)[:3] == [{"id": 7, "method": "m"}, {"next": 2}, {"n": 3}]
    f = Framer()  # overstated and nothing follows: read once the client stalls
    assert f.feed(b"Content-Length: %d\r\n\r\n" % (len(body) + 40) + body) == []
    assert messages(f.stalled()) == [{"id": 7, "method": "m"}]


def test_framer_skips_oversize_bodies_without_buffering_them():
    f = Framer(max_body=1000)
    head = b'{"jsonrpc": "2.0", "id": 3, "method": "big", "params": {"t": "'
    body = head + b"x" * (5000 - len(head) - 3) + b'"}}'
    frames = []
    data = b"Content-Length: 5000\r\n\r\n" + body + frame({"ok": 1})
    for i in range(0, len(data), 512):
        frames += f.feed(data[i:i + 512])
        assert len(f.buf) <= 1024
    assert [fr.kind for fr in frames] == ["oversize", "message"]
    assert id_in(frames[0].head) == 3


JUNK = st.binary(max_size=200).map(lambda b: b.replace(b"C", b"_").replace(b"c", b"_"))  # no Content-Length in it


@settings(max_examples=400, deadline=None)
@given(junk=st.lists(JUNK, max_size=4), cuts=st.lists(st.integers(1, 64), max_size=20), payloads=st.lists(
    st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=20)), max_size=3), min_size=1, max_size=4))
def test_framer_never_raises_and_recovers_the_well_formed_messages_after_junk(junk, cuts, payloads):
    stream = b"".join(j + b"\r\n" for j in junk) + b"".join(frame(p) for p in payloads)
    f = Framer()
    frames, pos = [], 0
    for cut in cuts:
        frames += f.feed(stream[pos:pos + cut])
        pos += cut
    frames += f.feed(stream[pos:])
    frames += f.stalled()
    got = messages(frames)
    assert got[len(got) - len(payloads):] == payloads


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3).map(frame),  # as clients frame them
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3).map(
        lambda p: frame(p).replace(b"Content-Length: ", b"content-length:")),  # a header variant
    st.sampled_from([b"Content-Length: 3\r\n\r\n{x}", b"Content-Length: 2\r\n\r\n[1]", b"junk\r\n",
                     b"Content-Length: 4\r\nContent-Type: x\r\n\r\n[{}]"])), max_size=6))
def test_a_read_of_whole_messages_frames_as_the_same_bytes_one_at_a_time(parts):
    """What one read of many messages gives (each header block cut in one match where it can be) is what the same
    bytes give fed one by one (line by line): the one-match way changes the speed, not the reading."""
    stream = b"".join(parts)
    whole = Framer().feed(stream)
    f = Framer()
    one_by_one = [fr for i in range(len(stream)) for fr in f.feed(stream[i:i + 1])]
    assert [(fr.kind, fr.value, fr.note) for fr in whole] == [(fr.kind, fr.value, fr.note) for fr in one_by_one]
