"""A seeded, bounded fuzz of a real `tabd serve` (#41): hostile messages to every method tabd handles, interleaved
with real edits, in bursts, with cancels.

Every request must be answered exactly once, the session must stay alive, the document must equal a reference kept
here by LSP's rules, nothing but frames may come out, and the server's memory after the fuzz must be within 10% of
what it was after a warm-up of the same kinds of message.
"""
from __future__ import annotations

import json
import random
import re

from support.rawserver import frame
from support.strict import StrictServer

SEED = 41
MESSAGES = 700  # about five seconds on a loaded 2-core machine
URI = "file:///w/fuzz.py"
OTHER = "file:///w/other.py"
PIECES = ["a", "b", " ", "\n", "\r\n", "\r", "😀", "中", "é", "\u2028", "\t", "x = 1", "def f():\n    "]
HOSTILE_VALUES = [None, True, -1, 10 ** 400, 2.5, "", "x" * 300, "\ud800", [], {}, [[[[]]]], {"a": {"b": None}},
                  "\u0000", -2 ** 63, float("1e308")]
METHODS = ["textDocument/inlineCompletion", "textDocument/completion", "textDocument/copilotInlineEdit",
           "tabd/stats", "tabd/document", "tabd/context", "tabd/setEnabled", "workspace/executeCommand",
           "textDocument/didShowInlineEdit", "textDocument/didFocus", "tabd/focus", "$/cancelRequest", "$/setTrace",
           "textDocument/didOpen", "textDocument/didClose", "textDocument/didChange", "initialize", "initialized",
           "workspace/didChangeConfiguration", "no/such/method", "textDocument/hover"]
COMMANDS = ["tabd.accept", "tabd.dismiss", "tabd.acceptInlineEdit", "tabd.rejectInlineEdit", "no.such.command"]


# -- the reference document: LSP's rules written the slow, obvious way (as tests/server/test_sync.py) ---------------

def units(ch: str) -> int:
    return len(ch.encode("utf-16-le")) // 2


def ref_lines(text: str) -> list[tuple[int, str]]:
    lines, start = [], 0
    for m in re.finditer(r"\r\n|\r|\n", text):
        lines.append((start, text[start:m.start()]))
        start = m.end()
    lines.append((start, text[start:]))
    return lines


def ref_offset(text: str, line: int, character: int) -> int:
    lines = ref_lines(text)
    if line >= len(lines):
        return len(text)
    start, content = lines[line]
    used = 0
    for i, ch in enumerate(content):
        if used + units(ch) > character:
            return start + i
        used += units(ch)
    return start + len(content)


# -- messages ------------------------------------------------------------------------------------------------------

class Fuzzer:
    def __init__(self, rng: random.Random, text: str) -> None:
        self.rng = rng
        self.text = text
        self.version = 1
        self.next_id = 0
        self.ids: list[int] = []

    def value(self, depth: int = 0):
        rng = self.rng
        roll = rng.random()
        if depth < 3 and roll < 0.2:
            return {rng.choice(["uri", "textDocument", "position", "line", "character", "text", "id", "enabled",
                                "minutes", "command", "arguments", "item", "x"]): self.value(depth + 1)
                    for _ in range(rng.randint(0, 3))}
        if depth < 3 and roll < 0.3:
            return [self.value(depth + 1) for _ in range(rng.randint(0, 3))]
        if roll < 0.4:
            return {"textDocument": {"uri": rng.choice([URI, OTHER, 5, None]), "version": self.value(3)},
                    "position": {"line": self.value(3), "character": rng.choice([0, 3, -1, 2 ** 31, "x"])}}
        return rng.choice(HOSTILE_VALUES)

    def request(self, method: str, params) -> bytes:
        self.next_id += 1
        self.ids.append(self.next_id)
        return frame({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})

    def edit(self) -> bytes:
        """A real edit at a random place (past line ends and the last line too); the reference follows it."""
        rng, text = self.rng, self.text
        lines = ref_lines(text)

        def position():
            line = rng.randint(0, len(lines))
            width = sum(units(c) for c in lines[line][1]) if line < len(lines) else 0
            return {"line": line, "character": rng.randint(0, width + 2)}

        start, end = sorted([position(), position()], key=lambda p: ref_offset(text, p["line"], p["character"]))
        new = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 3)))
        a, b = ref_offset(text, start["line"], start["character"]), ref_offset(text, end["line"], end["character"])
        self.text = text[:a] + new + text[b:]
        self.version += 1
        return frame({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": URI, "version": self.version},
            "contentChanges": [{"range": {"start": start, "end": end}, "text": new}]}})

    def broken_edit(self) -> bytes:
        """A didChange that must change nothing: a text that is not a string, a range or version that does not
        read."""
        rng = self.rng
        change = rng.choice([{"text": rng.choice([None, 5, {"a": 1}, ["x"]])},
                             {"range": {"start": "x", "end": {"line": 0, "character": 0}}, "text": "zzz"},
                             {"range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 0}},
                              "text": "zzz"}])
        version = rng.choice([self.version, "7", None])
        return frame({"jsonrpc": "2.0", "method": "textDocument/didChange",
                      "params": {"textDocument": {"uri": URI, "version": version}, "contentChanges": [change]}})

    def hostile(self) -> bytes:
        rng = self.rng
        method = rng.choice(METHODS)
        if method == "workspace/executeCommand":
            params = {"command": rng.choice(COMMANDS), "arguments": [self.value() for _ in range(rng.randint(0, 2))]}
        elif method in ("textDocument/didOpen", "textDocument/didClose"):
            params = {"textDocument": {"uri": OTHER, "languageId": "python", "version": 1, "text": self.value()}}
        elif method == "textDocument/didChange":
            return self.broken_edit()
        else:
            params = self.value()
        if rng.random() < 0.6:
            return self.request(method, params)
        return frame({"jsonrpc": "2.0", "method": method, "params": params})

    def deep(self) -> bytes:
        depth = self.rng.choice([65, 300, 1500, 5000])
        self.next_id += 1
        self.ids.append(self.next_id)
        method = self.rng.choice(["tabd/stats", "textDocument/inlineCompletion", "tabd/setEnabled"])
        return frame(('{"jsonrpc":"2.0","id":%d,"method":"%s","params":%s}'
                      % (self.next_id, method, "[" * depth + "]" * depth)).encode())

    def cancelled(self) -> bytes:
        """A request and its cancel in the same burst: still answered, with a result or RequestCancelled."""
        request = self.request("textDocument/inlineCompletion", {
            "textDocument": {"uri": URI}, "position": {"line": 0, "character": self.rng.randint(0, 5)}})
        return request + frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": self.next_id}})

    def big(self) -> bytes:
        return self.request(self.rng.choice(["tabd/document", "textDocument/copilotInlineEdit", "tabd/stats"]),
                            {"textDocument": {"uri": "file:///" + "é" * 30_000}, "uri": "x" * 200_000})

    def junk(self) -> bytes:
        return b"this is not a header: " + bytes(self.rng.randint(0x20, 0x7a) for _ in range(40)).replace(b"{", b"(") \
            + b"\r\n"

    def burst(self) -> bytes:
        rng = self.rng
        kinds = [(self.edit, 35), (self.hostile, 40), (self.broken_edit, 6), (self.deep, 5), (self.cancelled, 6),
                 (self.junk, 3), (self.big, 1)]
        out = b""
        for _ in range(rng.randint(1, 6)):
            make = rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
            out += make()
        return out


def run(s: StrictServer, fuzzer: Fuzzer, messages: int) -> None:
    """Bursts of messages, each written at once; a burst's requests are answered before the next burst (as an
    editor waits, and so the memory measured is what the server keeps, not how many requests were in flight)."""
    sent = 0
    while sent < messages:
        burst = fuzzer.burst()
        s.send_bytes(burst)
        sent += burst.count(b"Content-Length") + burst.count(b"not a header")
        for msg_id in fuzzer.ids:  # every request answered, once
            reply = s.response(msg_id, timeout=30)
            assert ("result" in reply) != ("error" in reply), reply
        fuzzer.ids.clear()
    assert not [m for m in s.messages if "id" in m and "method" not in m], "answers to requests never sent"


def test_fuzz_every_request_answered_the_document_in_sync_nothing_outside_frames(tmp_path):
    rng = random.Random(SEED)
    # glibc keeps large freed blocks for reuse unless told to unmap them: RSS would then say what the biggest
    # message cost at its peak, not what the server keeps
    s = StrictServer("--backend", "copy", "--no-warmup", "--debounce-ms", "0", "--no-speculation",
                     stderr=tmp_path / "stderr.txt", env={"MALLOC_MMAP_THRESHOLD_": "131072"})
    try:
        options = {"exclude": ["**/" * 20 + "*a", "*a" * 7 + "b", "[z-a]", "{" * 50 + "a" + "}" * 50],
                   "log": rng.choice(["a\u0000b", "\ud800", "/nonexistent/x.jsonl"]), "depth": "deep",
                   "editorInfo": {"name": "fuzz"}, **{f"unknown{i}": i for i in range(50)}}
        s.initialize(options)
        text = "def f(x):\n    return x\r\n中文 😀 é\n"
        s.open(URI, text)
        fuzzer = Fuzzer(rng, text)
        run(s, fuzzer, MESSAGES)  # the warm-up: the same mix, so what is measured after it is what the fuzz adds
        before = s.rss_kb()
        run(s, fuzzer, MESSAGES)
        assert s.document(URI)["text"] == fuzzer.text
        s.alive()
        after = s.rss_kb()
        assert after <= before * 1.10, (before, after)
        popups = s.notifications("window/showMessage")
        assert len(popups) <= 20 and all(len(m["params"]["message"]) < 600 for m in popups)
        json.dumps(popups)
        assert s.shutdown_exit() == 0
        assert s.stray == b"", s.stray[:300]
    finally:
        s.close()
