"""Copilot's NES clients against a real `tabd serve`: each speaks exactly its requests, in its order, with its timing
(written from their documented behaviour and source; nothing of theirs is needed here), on lines with non-ASCII text:

- copilot-lsp (copilotlsp-nvim/copilot-lsp): Neovim 0.11 offers UTF-8 first; Copilot's init options; one request
  500 ms after the last keystroke (TextChangedI / TextChanged, debounced), position in UTF-16; it applies the edit
  itself in UTF-16 (Neovim's didChange is the change less what old and new share), never runs the command, leaves the
  cursor at the end of the old range, and its TextChanged asks again 500 ms later;
- sidekick.nvim: asks 100 ms after leaving insert mode (Esc moves the cursor one left), in the negotiated unit; it
  applies the edit, runs its command, leaves the cursor at the end of the line and asks again 100 ms after.

A rename, a wrapper added and an annotation added (typed as two insertions on one line) are each walked to their last
place with Tab: the document must end exactly as the person would have written it, and every edit after the first
must come from memory."""
from __future__ import annotations

import itertools
import time

import pytest

from support.rawserver import RawServer

pytestmark = pytest.mark.server

NEOVIM_INIT = {"editorInfo": {"name": "neovim", "version": "0.11.4"},
               "editorPluginInfo": {"name": "Github Copilot LSP for Neovim", "version": "0.0.1"}}
_uris = itertools.count()

RENAME = ('def größe(count):\n    print("Σ ünï", count)\n    log("ß", count, "é")\n    return count  # ✓ ok\n',
          [("größe(count)", "größe(total_sum)")],
          'def größe(total_sum):\n    print("Σ ünï", total_sum)\n    log("ß", total_sum, "é")\n'
          '    return total_sum  # ✓ ok\n')
WRAPPER = ('def a():\n    return wrap("Σ", new_func)\ndef b():\n    return wrap("ü", new_func)\n'
           'def c():\n    return wrap("é", new_func)\n',
           [('"Σ", new_func', '"Σ", t.cast("F", new_func)')],
           'def a():\n    return wrap("Σ", t.cast("F", new_func))\ndef b():\n    return wrap("ü", t.cast("F", new_func))\n'
           'def c():\n    return wrap("é", t.cast("F", new_func))\n')
# the annotation is typed as a person types it: `: "F"` after the parameter, then ` -> "F"` after the `)`
ANNOTATION = ('def größe(f):\n    return f\ndef maß(f):\n    print("ü", f)\n    return f\ndef él(f):\n    return f\n',
              [("größe(f", 'größe(f: "F"'), ('größe(f: "F")', 'größe(f: "F") -> "F"')],
              'def größe(f: "F") -> "F":\n    return f\ndef maß(f: "F") -> "F":\n    print("ü", f)\n    return f\n'
              'def él(f: "F") -> "F":\n    return f\n')


# ---------------------------------------------------------------- a Neovim buffer, in UTF-16 units


def position(text: str, offset: int) -> dict:
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    return {"line": line, "character": len(text[start:offset].encode("utf-16-le")) // 2}


def offset(text: str, pos: dict) -> int:
    lines = text.split("\n")
    base = sum(len(x) + 1 for x in lines[:pos["line"]])
    units, line = 0, lines[pos["line"]]
    for i, ch in enumerate(line):
        if units >= pos["character"]:
            return base + i
        units += len(ch.encode("utf-16-le")) // 2
    return base + len(line)


def shared(old: str, new: str) -> tuple[int, int]:
    """The lengths of the prefix and suffix two texts share, not overlapping."""
    p = 0
    while p < min(len(old), len(new)) and old[p] == new[p]:
        p += 1
    s = 0
    while s < min(len(old), len(new)) - p and old[-1 - s] == new[-1 - s]:
        s += 1
    return p, s


def trimmed_change(old: str, new: str) -> dict:
    """Neovim's incremental didChange: the range of `old` that differs and what replaces it."""
    p, s = shared(old, new)
    return {"range": {"start": position(old, p), "end": position(old, len(old) - s)}, "text": new[p:len(new) - s]}


class Buffer:
    def __init__(self, server: RawServer, text: str) -> None:
        self.server, self.text, self.version = server, text, 1
        self.uri = f"file:///w/nes_{next(_uris)}.py"
        server.open(self.uri, text)
        self.cursor = 0

    def replace(self, start: int, end: int, new: str) -> None:
        after = self.text[:start] + new + self.text[end:]
        self.version += 1
        self.server.change(self.uri, self.version, [trimmed_change(self.text, after)])
        self.text = after

    def type_change(self, old: str, new: str) -> None:
        """A person's change in insert mode: the part that differs deleted, the new part typed key by key."""
        at = self.text.index(old)
        p, s = shared(old, new)
        start, end = at + p, at + len(old) - s
        if end > start:
            self.replace(start, end, "")
        for i, ch in enumerate(new[p:len(new) - s]):
            time.sleep(0.04)
            self.replace(start + i, start + i, ch)
        self.cursor = start + len(new) - p - s

    def ask(self) -> dict | None:
        reply = self.server.call("textDocument/copilotInlineEdit", {
            "textDocument": {"uri": self.uri, "version": self.version}, "position": position(self.text, self.cursor)},
            timeout=15.0)
        assert "error" not in reply, reply
        edits = reply["result"]["edits"]
        assert len(edits) <= 1
        return edits[0] if edits else None

    def apply(self, edit: dict) -> tuple[int, int]:
        """The edit applied in UTF-16 units; the old range's end and the new text's end, as offsets after it."""
        start, end = offset(self.text, edit["range"]["start"]), offset(self.text, edit["range"]["end"])
        old_end_pos = edit["range"]["end"]
        self.replace(start, end, edit["text"])
        return offset(self.text, old_end_pos), start + len(edit["text"])


# ---------------------------------------------------------------- the two clients


def copilot_lsp(server: RawServer, text: str, changes: list[tuple[str, str]]) -> tuple[str, list[str]]:
    buf = Buffer(server, text)
    for old, new in changes:
        buf.type_change(old, new)
    origins = []
    time.sleep(0.5)  # its debounce after the last keystroke
    edit = buf.ask()
    while edit is not None:
        origins.append(server.result("tabd/stats", {})["edits"]["last"]["origin"])
        server.notify("textDocument/didShowInlineEdit", {"item": {"command": edit["command"]}})
        old_end, _ = buf.apply(edit)  # no command: copilot-lsp never runs it
        buf.cursor = old_end  # walk_cursor_end_edit: the old range's end
        time.sleep(0.5)  # TextChanged, debounced
        edit = buf.ask()
        assert len(origins) < 10, "the walk did not end"
    return buf.text, origins


def sidekick(server: RawServer, text: str, changes: list[tuple[str, str]]) -> tuple[str, list[str]]:
    buf = Buffer(server, text)
    for old, new in changes:
        buf.type_change(old, new)
    buf.cursor -= 1  # Esc: the cursor steps back onto the last character typed
    origins = []
    time.sleep(0.1)  # ModeChanged i:n, debounced
    edit = buf.ask()
    while edit is not None:
        origins.append(server.result("tabd/stats", {})["edits"]["last"]["origin"])
        buf.apply(edit)
        server.result("workspace/executeCommand", {"command": edit["command"]["command"],
                                                   "arguments": edit["command"]["arguments"]})
        line = edit["range"]["start"]["line"]
        buf.cursor = offset(buf.text, {"line": line, "character": 10 ** 6})  # the end of the line
        time.sleep(0.1)  # SidekickNesDone, debounced
        edit = buf.ask()
        assert len(origins) < 10, "the walk did not end"
    return buf.text, origins


@pytest.fixture(scope="module")
def server():
    s = RawServer("--backend", "copy", "--no-warmup", "--edit-min-confidence", "0")
    s.initialize(options=NEOVIM_INIT, encodings=["utf-8", "utf-16", "utf-32"])
    yield s
    s.close()


@pytest.mark.parametrize("client", [copilot_lsp, sidekick], ids=["copilot-lsp", "sidekick"])
@pytest.mark.parametrize("case", [RENAME, WRAPPER, ANNOTATION], ids=["rename", "wrapper", "annotation"])
def test_each_change_is_walked_to_its_last_place_with_tab(server: RawServer, client, case):
    text, changes, expected = case
    final, origins = client(server, text, changes)
    assert final == expected
    assert origins and origins[0] == "computed" and all(o == "cache" for o in origins[1:]), origins


def test_copilot_s_init_options_are_taken_silently_and_utf16_is_chosen():
    s = RawServer("--backend", "copy", "--no-warmup")
    try:
        result = s.initialize(options=NEOVIM_INIT, encodings=["utf-8", "utf-16", "utf-32"])
        assert result["capabilities"].get("positionEncoding", "utf-16") == "utf-16"
        s.alive()
        said = [m["params"]["message"] for m in s.notifications("window/showMessage")]
        assert not any("editorInfo" in m or "editorPluginInfo" in m for m in said), said
    finally:
        s.close()


def test_a_request_while_typing_is_held_until_the_pause_then_answered(server: RawServer):
    buf = Buffer(server, "a = count\nb = count\n")
    buf.type_change("a = count", "a = total")
    held = server.result("tabd/stats", {})["edits"]["held"]
    edit = buf.ask()  # at once, the cursor still at the end of the name being typed
    assert edit is not None and edit["text"] == "total" and edit["range"]["start"]["line"] == 1
    assert server.result("tabd/stats", {})["edits"]["held"] == held + 1  # held for the pause, not answered empty


def test_a_rejected_change_is_not_proposed_again_in_that_document(server: RawServer):
    buf = Buffer(server, "a = count\nb = count\nc = count\n")
    buf.type_change("a = count", "a = total")
    time.sleep(1.0)
    edit = buf.ask()
    assert edit is not None
    assert server.result("workspace/executeCommand", {"command": "tabd.rejectInlineEdit",
                                                      "arguments": edit["command"]["arguments"]})["rejected"]
    assert buf.ask() is None
    buf.cursor = buf.text.index("c = count")
    assert buf.ask() is None
