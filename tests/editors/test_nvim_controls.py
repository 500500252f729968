"""The Neovim plugin's switches (#27), driven by real keystrokes and commands in headless Neovim 0.7 and 0.11.

- Every filetype but a deny list by default: a TypeScript and a Go buffer get suggestions from a real
  `tabd serve` (the fixture model, which writes ` total()` at the end of a line, so the text is known).
- :TabdToggle off: no ghost text, and not one request reaches the server (its tabd/stats counters and the
  plugin's own stay still); on again: the suggestion is back. :TabdSnooze with a fraction of a minute ends by
  itself and the suggestion comes back without a keystroke.
- Against the fake server of test_nvim.py: the exact tabd/setEnabled notifications the contract names,
  per buffer with a bang, bad snooze counts reported and ignored, the words require('tabd').status() gives
  for each empty-answer reason, the filetype / file glob options, and the alternatives of an invoked
  request cycled with <M-]> / <M-[>.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pynvim")

from test_nvim import (  # noqa: E402,F401  (fixtures are used by name)
    FAKE_SERVER,
    Editor,
    _fake_session,
    _real_server_available,
    _tabd_cmd,
    fake_editor,
    nvim_bin,
)

pytestmark = [pytest.mark.editors, pytest.mark.slow]

# Every vim.notify kept, so a test reads what the user was told.
CAPTURE_NOTIFY = """
_G.notes = {}
vim.notify = function(msg, level) table.insert(_G.notes, {msg = msg, level = level or 0}) end
"""


def _ghost_text(ed: Editor, timeout: float = 10):
    return ed.wait_for(ed.ghost, timeout, "ghost text")["text"]


def _status(ed: Editor) -> str:
    return ed.lua("return require('tabd').status()")


def _set_enabled(ed: Editor) -> list[dict]:
    return ed.stats()["set_enabled"]


# --- the fake server: exact messages ---------------------------------------------------------------------

@pytest.fixture
def editor(fake_editor):
    """The fake session's editor, every switch on again whatever the test before left."""
    fake_editor.lua("require('tabd').enable(); require('tabd').enable({buffer = true})")
    yield fake_editor
    fake_editor.lua("require('tabd').enable(); require('tabd').enable({buffer = true})")
    fake_editor.nvim.input("<Esc>")
    fake_editor.nvim.command("bwipeout!")  # a parametrized test opens the same file again: a fresh buffer


def test_toggle_sends_set_enabled_and_stops_asking(editor):
    ed = editor
    ed.lua(CAPTURE_NOTIFY)
    uri = ed.lua("return vim.uri_from_bufnr(0)")
    ed.nvim.input("Go<C-u>    z =")
    assert _ghost_text(ed) == " x + 1\n    return z"
    asked = ed.lua("return require('tabd').state.requests")
    server_asked = len(ed.stats()["requests"])
    ed.nvim.input("<Cmd>TabdToggle<CR>")
    ed.wait_for(lambda: ed.ghost() is None and ed.extmarks() == [], 5, "the ghost text to go")
    assert _status(ed) == "disabled"
    ed.nvim.input(" q")
    ed.wait_for(lambda: ed.lines()[-1] == "    z = q", 5, "typing while disabled")
    time.sleep(0.3)  # longer than the plugin's debounce: a request would have gone by now
    assert ed.ghost() is None
    assert ed.lua("return require('tabd').state.requests") == asked
    assert len(ed.stats()["requests"]) == server_asked
    ed.nvim.input("<Cmd>TabdToggle<CR>")  # on again, in insert mode: it asks at once, no keystroke needed
    assert _ghost_text(ed) == "uiet"
    # Per buffer (bang): this buffer only.
    ed.nvim.input("<Cmd>TabdToggle!<CR>")
    ed.wait_for(lambda: ed.ghost() is None, 5, "the ghost text to go")
    assert _status(ed) == "disabled in this buffer"
    ed.nvim.input("<Cmd>TabdToggle!<CR>")
    assert _ghost_text(ed) == "uiet"
    assert ed.wait_for(lambda: len(_set_enabled(ed)) == 4 and _set_enabled(ed), 5, "four notifications") == [
        {"enabled": False}, {"enabled": True}, {"enabled": False, "uri": uri}, {"enabled": True, "uri": uri}]
    assert [n["msg"] for n in ed.lua("return _G.notes")] == [
        "tabd: disabled", "tabd: enabled", "tabd: disabled in this buffer", "tabd: enabled in this buffer"]


def test_snooze_ends_by_itself(editor):
    ed = editor
    ed.nvim.input("Go<C-u>    z =")
    _ghost_text(ed)
    ed.nvim.input("<Cmd>TabdSnooze 0.02<CR>")  # 1.2 s
    ed.wait_for(lambda: ed.ghost() is None, 5, "the ghost text to go")
    assert _status(ed).startswith("snoozed (")
    sent = ed.wait_for(lambda: _set_enabled(ed), 5, "tabd/setEnabled")
    assert sent == [{"enabled": False, "minutes": 0.02}]
    ed.nvim.input(" q")
    time.sleep(0.2)
    assert ed.ghost() is None
    # No keystroke: the end of the snooze asks at the cursor.
    assert ed.wait_for(ed.ghost, 10, "the suggestion back after the snooze")["text"] == "uiet"
    assert _status(ed) == "suggestion shown"
    assert _set_enabled(ed) == [{"enabled": False, "minutes": 0.02}, {"enabled": True}]


@pytest.mark.parametrize("count", ["0", "-1", "soon"])
def test_bad_snooze_is_reported_and_ignored(editor, count):
    ed = editor
    ed.lua(CAPTURE_NOTIFY)
    ed.nvim.command(f"TabdSnooze {count}")
    notes = ed.lua("return _G.notes")
    assert len(notes) == 1 and notes[0]["level"] == ed.lua("return vim.log.levels.ERROR"), notes
    assert "minutes" in notes[0]["msg"] and count in notes[0]["msg"], notes
    assert not _status(ed).startswith("snoozed")
    ed.nvim.input("Go<C-u>    z =")
    assert _ghost_text(ed) == " x + 1\n    return z"
    assert _set_enabled(ed) == []


@pytest.mark.parametrize("code, words", [
    ("unsure", "unsure"),
    ("debounced", "waiting for typing to pause"),
    ("excluded", "excluded file"),
    ("disabled", "disabled"),
    ("loading", "model loading"),
    ("unreachable", "engine unreachable"),
])
def test_status_says_why_nothing_shows(editor, code, words):
    ed = editor
    ed.nvim.input("Go<C-u>    z =")
    _ghost_text(ed)
    assert _status(ed) == "suggestion shown"
    ed.nvim.input(f" reason_{code}")  # the fake answers nothing there, with that reason
    ed.wait_for(lambda: ed.stats()["requests"][-1]["prefix_tail"].endswith(code), 5, "the request")
    assert ed.wait_for(lambda: _status(ed) == words, 5, f"status {words!r}")
    assert ed.ghost() is None


def test_filetypes_and_file_globs(nvim_bin, tmp_path):
    server = tmp_path / "fake_tabd.py"
    server.write_text(FAKE_SERVER)
    setup = """
        require("tabd").setup({cmd = CMD, debounce_ms = 30, disabled_filetypes = vim.list_extend({"markdown"}, require("tabd").defaults.disabled_filetypes),
          disabled_files = {"*.min.js", "vendor/**", "[oops"}, files = 7})
    """
    ed = Editor(nvim_bin, [sys.executable, str(server)], tmp_path, hard_limit_s=60,
                extra_init=CAPTURE_NOTIFY + setup.replace("CMD", "require('tabd').config.cmd"))
    try:
        notes = [n["msg"] for n in ed.lua("return _G.notes")]
        assert any("files must be a list" in n for n in notes), notes
        assert any("does not parse" in n and "[oops" in n for n in notes), notes
        for name, text in [("a.ts", "const n = 1\n"), ("vendor/lib.js", "x\n"), ("app.min.js", "x\n"),
                           ("notes.md", "# hi\n"), ("COMMIT_EDITMSG", "x\n")]:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)
        ed.open(tmp_path / "a.ts", timeout=30)  # every filetype but the deny list: TypeScript too
        ed.nvim.input("A x")
        assert _ghost_text(ed) == "_next"
        ed.nvim.input("<Esc>")
        for name, why in [("vendor/lib.js", "off for this file (vendor/**)"),
                          ("app.min.js", "off for this file (*.min.js)"),
                          ("notes.md", "off for filetype markdown")]:
            ed.nvim.command(f"edit {tmp_path / name}")
            assert _status(ed) == why
            assert not ed.lua("return require('tabd').is_attached(0)")
        ed.nvim.command(f"edit {tmp_path / 'COMMIT_EDITMSG'}")  # the default deny list, extended
        assert _status(ed) == "off for filetype gitcommit"
        # Opened later, a buffer tabd never attached to was never sent to the server.
        docs = ed.lua("""
            local c = require('tabd').get_client()
            return vim.tbl_map(function(b) return vim.api.nvim_buf_get_name(b) end, vim.lsp.get_buffers_by_client_id(c.id))
        """)
        assert [Path(d).name for d in docs] == ["a.ts"], docs
    finally:
        ed.close()


def test_invoked_alternatives_cycle(editor):
    ed = editor
    ed.nvim.input("Go<C-u>    alt")
    assert _ghost_text(ed) == "_next"  # automatic: one suggestion
    ed.nvim.input("<M-\\>")  # invoked: the alternatives
    ed.wait_for(lambda: (ed.ghost() or {}).get("count") == 3, 5, "three alternatives")
    assert ed.stats()["requests"][-1]["kind"] == 1
    seen = [ed.ghost()["text"]]
    for key in ["<M-]>", "<M-]>", "<M-]>", "<M-[>"]:
        ed.nvim.input(key)
        time.sleep(0.05)
        seen.append((ed.ghost()["text"], ed.ghost()["index"]))
    assert seen == ["_one", ("_two", 2), ("_three", 3), ("_one", 1), ("_three", 3)]
    assert ed.extmarks()[0][3]["virt_text"][0][0] == "_three"
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-1] == "    alt_three", 5, "the alternative accepted")
    accepts = ed.wait_for(lambda: ed.stats()["accepts"], 5, "tabd.accept")
    assert accepts[0][0] == "a3"  # the command of the item accepted, not the first one's


def test_starting_switched_off(nvim_bin, tmp_path):
    """enabled = false: the server hears it as soon as it starts, nothing is asked, and :TabdEnable brings
    suggestions."""
    server = tmp_path / "fake_tabd.py"
    server.write_text(FAKE_SERVER)
    setup = "require('tabd').setup({cmd = require('tabd').config.cmd, debounce_ms = 30, enabled = false})"
    ed = Editor(nvim_bin, [sys.executable, str(server)], tmp_path, hard_limit_s=60, extra_init=setup)
    try:
        src = tmp_path / "off.py"
        src.write_text("x = 1\n")
        ed.open(src, timeout=30)
        assert ed.wait_for(lambda: _set_enabled(ed), 5, "tabd/setEnabled") == [{"enabled": False}]
        ed.nvim.input("Go    z =")
        ed.wait_for(lambda: ed.lines()[-1] == "    z =", 5, "typing")
        time.sleep(0.3)
        assert ed.stats()["requests"] == [] and ed.ghost() is None
        ed.nvim.command("TabdEnable")
        assert _ghost_text(ed) == " x + 1\n    return z"
        assert _set_enabled(ed) == [{"enabled": False}, {"enabled": True}]
    finally:
        ed.close()


# --- the real daemon ---------------------------------------------------------------------------------------

needs_server = pytest.mark.skipif(not _real_server_available(), reason="tabd serve is not available in this build")


@pytest.fixture(scope="module")
def real_editor(nvim_bin, tmp_path_factory, fixture_model):
    """One Neovim per version, with the default options, on `tabd serve` and the fixture model (minConfidence 0:
    its probabilities are tiny, and gating is not what is tested)."""
    tmp = tmp_path_factory.mktemp("nvim-controls")
    log = tmp / "tabd.jsonl"
    cmd = [*_tabd_cmd(), "--model", fixture_model, "--min-confidence", "0", "--log", str(log)]
    ed = Editor(nvim_bin, cmd, tmp, hard_limit_s=400)
    try:
        yield ed, tmp
    finally:
        ed.close()


def _answered(stats: dict) -> int:
    """Every inlineCompletion the server answered, whatever answered it."""
    return sum(stats["sources"].values())


@needs_server
@pytest.mark.parametrize("name, first, line", [("app.ts", "const items = [1, 2]", "const n = items.length"),
                                               ("main.go", "package main", "var n = len(items)")])
def test_real_daemon_typescript_and_go(real_editor, name, first, line):
    ed, tmp = real_editor
    src = tmp / name
    src.write_text(first + "\n")
    ed.nvim.input("<Esc>")
    ed.open(src, timeout=90)
    assert ed.lua("return vim.bo.filetype") == {"app.ts": "typescript", "main.go": "go"}[name]
    ed.nvim.input("Go" + line)
    assert _ghost_text(ed, timeout=120) == " total()"
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[-1] == line + " total()", 10, "the accept")


@needs_server
def test_real_daemon_toggle_and_snooze(real_editor):
    ed, tmp = real_editor
    src = tmp / "toggle.py"
    src.write_text("import os\n")
    ed.nvim.input("<Esc>")
    ed.open(src, timeout=90)
    ed.nvim.input("Goitems = []")
    assert _ghost_text(ed, timeout=120) == " total()"
    ed.wait_for(lambda: ed.stats()["queue_depth"] == 0, 60, "the prefetches to settle")
    # Off: nothing shows, and nothing reaches the server however much is typed.
    ed.nvim.input("<Cmd>TabdToggle<CR>")
    ed.wait_for(lambda: ed.ghost() is None and ed.extmarks() == [], 5, "the ghost text to go")
    before = ed.stats()
    for key in "\nn = len(items)":
        ed.nvim.input("<CR>" if key == "\n" else key)
    ed.wait_for(lambda: ed.lines()[-1] == "n = len(items)", 5, "typing while disabled")
    time.sleep(1.0)  # a request would have been answered by now (the fixture model answers in milliseconds)
    after = ed.stats()
    assert ed.ghost() is None
    assert _answered(after) == _answered(before), (before["sources"], after["sources"])
    assert after["model_calls"] == before["model_calls"]
    assert _status(ed) == "disabled"
    # On: the suggestion is back at the cursor, at once.
    ed.nvim.input("<Cmd>TabdToggle<CR>")
    assert _ghost_text(ed, timeout=60) == " total()"
    assert _answered(ed.stats()) > _answered(after)
    # Snoozed for 1.5 s: nothing, then back by itself.
    ed.nvim.input("<Cmd>TabdSnooze 0.025<CR>")
    ed.wait_for(lambda: ed.ghost() is None, 5, "the ghost text to go")
    assert _status(ed).startswith("snoozed")
    ed.nvim.input("<CR>m = 1")
    ed.wait_for(lambda: ed.lines()[-1] == "m = 1", 5, "typing while snoozed")
    assert ed.ghost() is None
    assert ed.wait_for(ed.ghost, 30, "the suggestion after the snooze")["text"] == " total()"
    assert _status(ed) == "suggestion shown"


def _server_has_controls() -> bool:
    """True, or an import error that fails the collection: the server takes tabd/setEnabled and gives reasons (#27's
    server side); a build whose server cannot be imported must fail these tests, not skip them."""
    from tabd.lsp.server import SET_ENABLED  # noqa: F401

    return True


RAW_REQUEST = """
local c = require('tabd').get_client()
local row, col = unpack(vim.api.nvim_win_get_cursor(0))
local params = {textDocument = {uri = vim.uri_from_bufnr(0)}, position = {line = row - 1, character = col},
  context = {triggerKind = 2}}
local r = vim.fn.has('nvim-0.11') == 1 and c:request_sync('textDocument/inlineCompletion', params, 10000, 0)
  or c.request_sync('textDocument/inlineCompletion', params, 10000, 0)
return r and r.result
"""


@needs_server
@pytest.mark.skipif(not _server_has_controls(), reason="this build's tabd serve has no tabd/setEnabled yet")
def test_real_daemon_hears_the_switches_and_gives_reasons(real_editor):
    """What the plugin sends reaches the daemon: asked behind the plugin's back (a raw request from the test),
    the daemon answers `disabled` while :TabdToggle is off, and answers again when on; an excluded file's empty
    answer reads `excluded file` in status()."""
    ed, tmp = real_editor
    src = tmp / "switches.py"
    src.write_text("import os\n")
    ed.nvim.input("<Esc>")
    ed.open(src, timeout=90)
    ed.nvim.input("Goitems = []")
    assert _ghost_text(ed, timeout=120) == " total()"
    ed.nvim.input("<Esc>")
    ed.nvim.command("TabdToggle")
    assert ed.wait_for(lambda: (ed.lua(RAW_REQUEST) or {}).get("tabd", {}).get("reason") == "disabled", 10,
                       "the daemon to answer `disabled`")
    ed.nvim.command("TabdToggle!")  # this buffer off, then everything on: the buffer stays off at the daemon
    ed.nvim.command("TabdToggle")
    assert ed.lua(RAW_REQUEST)["tabd"]["reason"] == "disabled"
    ed.nvim.command("TabdToggle!")
    ed.wait_for(lambda: (ed.lua(RAW_REQUEST) or {}).get("items"), 30, "the daemon to answer again")
    secret = tmp / "credentials.py"
    secret.write_text("token = 1\n")
    ed.open(secret, timeout=30)
    ed.nvim.input("Goname = 2")
    ed.wait_for(lambda: _status(ed) == "excluded file", 30, "status: excluded file")
    assert ed.ghost() is None


TS_CODE = """import { readFileSync } from "fs";

export function readLines(path: string): string[] {
  return readFileSync(path, "utf8").split("\\n");
}

export function countLines(path: string): number {
  const lines = readLines(path);
"""

GO_CODE = """package main

import (
\t"fmt"
\t"os"
)

func readLines(path string) ([]string, error) {
\tdata, err := os.ReadFile(path)
\tif err != nil {
\t\treturn nil, err
\t}
"""


FILES = [
    ("lines.ts", TS_CODE, ["  return lines.length;", "<CR>}<CR><CR>", "export function firstLine(path: string): string {",
                           "<CR>  const lines = readLines(", "path);"]),
    ("lines.go", GO_CODE, ["\treturn strings.Split(string(data), ", "\"\\n\"), nil", "<CR>}<CR><CR>",
                           "func countLines(path string) int {", "<CR>\tlines, _ := readLines("]),
]


ANSWERED = """
local t = require('tabd')
if t.current() then return 'shown' end
if not t.is_pending() and t.state.last_reason and t.state.last_reason ~= 'loading' then return t.state.last_reason end
return false
"""


def _type_until_a_suggestion(ed: Editor, chunks: list[str], first_timeout: float) -> dict | None:
    """Type real code a chunk at a time; after each, wait for the answer at the end of it: a suggestion, or an empty
    answer (the model may have none there) and on to the next chunk."""
    for i, chunk in enumerate(chunks):
        ed.lua("require('tabd').state.last_reason = nil")
        for key in ([chunk] if chunk.startswith("<") else list(chunk)):
            ed.nvim.input("<lt>" if key == "<" else key)
        time.sleep(0.1)  # the keys are typed (input is queued)
        if ed.wait_for(lambda: ed.lua(ANSWERED), first_timeout if i == 0 else 30, "an answer") == "shown":
            return ed.ghost()
    return None


@needs_server
def test_real_daemon_embedded_model_in_typescript_and_go(nvim_bin, tmp_path):
    """The shipped model and the plugin's defaults (every filetype but the deny list), in a TypeScript and a Go
    file: typing real code, a suggestion shows at one of five places in each, and Tab inserts it."""
    ed = Editor(nvim_bin, _tabd_cmd(), tmp_path, hard_limit_s=400)
    try:
        for n, (name, code, chunks) in enumerate(FILES):
            src = tmp_path / name
            src.write_text(code)
            ed.nvim.input("<Esc>")
            ed.open(src, timeout=90)
            ed.nvim.input("GA")
            ghost = _type_until_a_suggestion(ed, chunks, 120 if n == 0 else 30)
            assert ghost and ghost["text"], f"no suggestion in {name} at any of five places: {ed.lines()[-3:]}"
            before = ed.lines()
            ed.nvim.input("<Tab>")
            ed.wait_for(lambda: ed.lines() != before, 10, "the accept")
            typed_line = before[ghost["row"]][: ghost["col"]]
            assert "\n".join(ed.lines()[ghost["row"]:]).startswith(typed_line + ghost["text"])
    finally:
        ed.close()


@needs_server
def test_real_daemon_alternatives_cycle(real_editor):
    """An invoked request (<M-\\>) where the file has a copy the model's guess beat: tabd returns both, <M-]> shows
    the other, and Tab inserts the one shown."""
    ed, tmp = real_editor
    src = tmp / "alternatives.py"
    src.write_text("result = compute(alpha, beta)\nother = 2\n")
    ed.nvim.input("<Esc>")
    ed.open(src, timeout=90)
    ed.nvim.input("Goresult = ")
    first = ed.wait_for(ed.ghost, 60, "the automatic suggestion")
    assert first["count"] == 1 and first["text"] == " total()"  # automatic: one item
    ed.nvim.input("<M-\\>")
    ghost = ed.wait_for(lambda: (ed.ghost() or {}).get("count", 0) >= 2 and ed.ghost(), 30, "the alternatives")
    assert ghost["text"] == " total()"
    ed.nvim.input("<M-]>")
    other = ed.wait_for(lambda: (ed.ghost() or {}).get("index") == 2 and ed.ghost(), 5, "the second alternative")
    assert other["text"] not in ("", " total()") and "compute" in other["text"], other
    ed.nvim.input("<Tab>")
    ed.wait_for(lambda: ed.lines()[2].startswith("result = " + other["text"].split("\n")[0]), 5, "its accept")
    assert ed.stats()["accepts"] >= 1
