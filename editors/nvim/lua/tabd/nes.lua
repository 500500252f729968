-- Next edits for Neovim: `textDocument/copilotInlineEdit` (GitHub Copilot's shape, which tabd serves), drawn as a
-- diff preview with extmarks: the text the edit removes highlighted, the new text as virtual text.
--
-- It asks when you leave insert mode, after a change made in normal mode, on CursorHold (and CursorHoldI with no
-- suggestion shown), and in insert mode right after an accepted suggestion the daemon has nothing to follow. An edit more than a
-- line from the cursor puts a marker at the cursor ("⇥ Tab: line N"): Tab jumps there, a second Tab applies. Tab
-- applies with nvim_buf_set_text, leaves the cursor at the end of the new text, runs the edit's command
-- (workspace/executeCommand; tabd speculated the next edit from there) and asks at once for the next one, which
-- tabd answers from memory. The dismissal key (<Esc>) hides it and runs tabd.rejectInlineEdit.
local M = {}

local api = vim.api
local uv = vim.uv or vim.loop
local util = require("tabd.util")
local client_call, line_text, split_lines = util.client_call, util.line_text, util.split_lines

local ns = api.nvim_create_namespace("tabd_edit")
M.ns = ns

local METHOD = "textDocument/copilotInlineEdit"
local HAS_INLINE_VIRT_TEXT = util.has("0.10")
local METHOD_NOT_FOUND = -32601

-- Set by init.lua: {get_client = fn() -> client|nil, active = fn(buf) -> bool, config = fn() -> table,
-- ghost_shown = fn() -> bool, hide_ghost = fn()}
local deps = nil

-- The edit on screen (or nil): {buf, client_id, text, srow, scol, erow, ecol, version, uri, command, tick, anchor}
-- anchor: {row, col} of the cursor when it was shown (or jumped to): while the cursor is there, it keeps Tab.
local shown = nil
-- The request in flight: {client_id, request_id}
local pending = nil
local timer = nil
-- b:changedtick right after our own apply: its TextChanged is not the user's.
local own_tick = {}
-- Clients that answered MethodNotFound: not asked again.
local unsupported = {}
-- Where the last request was made: {buf, tick, row, col}; CursorHold does not ask twice for the same place.
local last_asked = nil

-- Numbers for tests and :checkhealth.
M.state = { requests = 0, responses = 0, shown = 0, applied = 0, jumps = 0, rejected = 0, last_error = nil }

local function config()
  return deps.config()
end

local function cursor()
  return util.cursor()
end

local function buf_version(buf)
  local v = vim.lsp.util.buf_versions[buf]
  return type(v) == "number" and v or 0
end

-- Drawing ---------------------------------------------------------------------------------------------------

local function utf8_chars(text)
  local out = {}
  for ch in text:gmatch("[%z\1-\127\192-\255][\128-\191]*") do
    out[#out + 1] = ch
  end
  return out
end

-- The part of the edit that changes: old and new text less the characters they share at both ends, as
-- {prefix_bytes, old_mid, new_mid}; `count` -> `total` stays whole, `f(a)` -> `f(a, b)` is `, b` inserted.
local function changed_part(old, new)
  local o, n = utf8_chars(old), utf8_chars(new)
  local p = 0
  while p < #o and p < #n and o[p + 1] == n[p + 1] do
    p = p + 1
  end
  local s = 0
  while s < #o - p and s < #n - p and o[#o - s] == n[#n - s] do
    s = s + 1
  end
  local prefix = table.concat(o, "", 1, p)
  return #prefix, table.concat(o, "", p + 1, #o - s), table.concat(n, "", p + 1, #n - s)
end

-- Byte (row, col) after walking `text` from (row, col).
local function advance(row, col, text)
  local lines = split_lines(text)
  if #lines == 1 then
    return row, col + #lines[1]
  end
  return row + #lines - 1, #lines[#lines]
end

local function old_text(e)
  return table.concat(api.nvim_buf_get_text(e.buf, e.srow, e.scol, e.erow, e.ecol, {}), "\n")
end

-- Whether the edit starts more than a line away from the cursor: then Tab jumps first.
local function far(e)
  local row = cursor()
  return math.abs(e.srow - row) > 1
end

local function render(e)
  local c = config()
  api.nvim_buf_clear_namespace(e.buf, ns, 0, -1)
  local skip, old_mid, new_mid = changed_part(old_text(e), e.text)
  local row, col = advance(e.srow, e.scol, old_text(e):sub(1, skip))
  local orow, ocol = advance(row, col, old_mid)
  if old_mid ~= "" then
    api.nvim_buf_set_extmark(e.buf, ns, row, col, { end_row = orow, end_col = ocol, hl_group = c.delete_hl })
  end
  if new_mid ~= "" then
    local lines = split_lines(new_mid)
    local opts = {}
    if HAS_INLINE_VIRT_TEXT then
      opts.virt_text = { { lines[1], c.insert_hl } }
      opts.virt_text_pos = "inline"
    else
      -- Before 0.10 there is no inline virtual text: the new text after the line, marked as what replaces.
      opts.virt_text = { { (old_mid ~= "" and " → " or " + ") .. lines[1], c.insert_hl } }
      opts.virt_text_pos = "eol"
    end
    if #lines > 1 then
      local extra = {}
      for i = 2, #lines do
        extra[#extra + 1] = { { lines[i] == "" and " " or lines[i], c.insert_hl } }
      end
      opts.virt_lines = extra
    end
    opts.hl_mode = "combine"
    api.nvim_buf_set_extmark(e.buf, ns, orow, ocol, opts)
  end
  local crow = cursor()
  if far(e) then
    api.nvim_buf_set_extmark(e.buf, ns, crow, 0, {
      virt_text = { { string.format("⇥ Tab: line %d", e.srow + 1), c.jump_hl } },
      virt_text_pos = "eol",
    })
  end
end

function M.clear()
  if shown and api.nvim_buf_is_valid(shown.buf) then
    api.nvim_buf_clear_namespace(shown.buf, ns, 0, -1)
  end
  shown = nil
end

-- The edit on screen, for tests and statuslines: {buf, text, start_row, start_col, end_row, end_col (0-based
-- rows, byte columns), jump = whether Tab jumps first, id} or nil.
function M.current()
  if not shown then
    return nil
  end
  local cmd = shown.command or {}
  return { buf = shown.buf, text = shown.text, start_row = shown.srow, start_col = shown.scol, end_row = shown.erow,
    end_col = shown.ecol, jump = far(shown), id = cmd.arguments and cmd.arguments[1] or nil }
end

-- Requests ----------------------------------------------------------------------------------------------------

local function cancel_pending()
  if pending then
    local client = vim.lsp.get_client_by_id(pending.client_id)
    if client then
      pcall(client_call, client, "cancel_request", pending.request_id)
    end
    pending = nil
  end
end

local function stop_timer()
  if timer then
    timer:stop()
  end
end

local function execute(client_id, command, arguments)
  local client = vim.lsp.get_client_by_id(client_id)
  if client then
    client_call(client, "request", "workspace/executeCommand", { command = command, arguments = arguments },
      function() end)
  end
end

-- An edit from the answer, in buffer bytes, or nil when it is not for this buffer as it is now.
local function edit_from(result, req)
  local edits = type(result) == "table" and result.edits or nil
  local edit = type(edits) == "table" and edits[1] or nil
  if type(edit) ~= "table" or type(edit.text) ~= "string" or type(edit.range) ~= "table" then
    return nil
  end
  local doc = edit.textDocument
  if type(doc) == "table" and doc.uri and doc.uri ~= req.uri then
    return nil
  end
  if type(doc) == "table" and type(doc.version) == "number" and req.version ~= 0 and doc.version ~= req.version then
    return nil -- against another version of the document than the buffer's
  end
  local s, e = edit.range.start, edit.range["end"]
  if type(s) ~= "table" or type(e) ~= "table" or type(s.line) ~= "number" or type(e.line) ~= "number"
      or type(s.character) ~= "number" or type(e.character) ~= "number" or s.line < 0 or s.character < 0 then
    return nil -- not a range: shown nothing rather than an error
  end
  local count = api.nvim_buf_line_count(req.buf)
  if s.line >= count or e.line >= count or e.line < s.line then
    return nil
  end
  local scol = util.to_byte_col(line_text(req.buf, s.line), s.character, req.encoding)
  local ecol = util.to_byte_col(line_text(req.buf, e.line), e.character, req.encoding)
  if e.line == s.line and ecol < scol then
    return nil
  end
  return { buf = req.buf, client_id = req.client_id, text = edit.text:gsub("\r\n", "\n"), srow = s.line, scol = scol,
    erow = e.line, ecol = ecol, version = req.version, uri = req.uri, command = edit.command,
    tick = api.nvim_buf_get_changedtick(req.buf) }
end

local function notify_shown(e)
  local client = vim.lsp.get_client_by_id(e.client_id)
  if client and type(e.command) == "table" then
    pcall(client_call, client, "notify", "textDocument/didShowInlineEdit", { item = { command = e.command } })
  end
end

-- "n" or "i" (nil in other modes): an answer is drawn only in the mode it was asked in.
local function mode()
  local m = api.nvim_get_mode().mode
  return (m == "n" or m:sub(1, 1) == "i") and m:sub(1, 1) or nil
end

local function on_result(req, err, result)
  if pending and pending.request_id == req.request_id then
    pending = nil
  end
  if err then
    if err.code == METHOD_NOT_FOUND then
      unsupported[req.client_id] = true
    elseif err.code ~= -32800 then
      M.state.last_error = err.message or vim.inspect(err)
    end
    return
  end
  M.state.responses = M.state.responses + 1
  local buf = req.buf
  if not api.nvim_buf_is_valid(buf) or api.nvim_get_current_buf() ~= buf
      or api.nvim_buf_get_changedtick(buf) ~= req.tick or mode() ~= req.mode then
    return -- the user typed, moved to another buffer or changed mode since
  end
  local e = edit_from(result, req)
  if not e then
    return
  end
  M.clear()
  -- One suggestion at a time under Tab (#44): the edit, asked for after a pause, takes the place of ghost text
  -- that would otherwise take Tab, and keeps it away while the cursor stays here (holds_tab).
  if deps.ghost_shown() then
    deps.hide_ghost()
  end
  e.anchor = { cursor() }
  shown = e
  render(e)
  M.state.shown = M.state.shown + 1
  notify_shown(e)
end

-- Ask for the next edit now, at the cursor or at (row, col) (bytes, 0-based). kind: 1 invoked, 2 automatic.
function M.request(kind, row, col)
  stop_timer()
  cancel_pending()
  local client = deps and deps.get_client()
  local buf = api.nvim_get_current_buf()
  if not client or unsupported[client.id] or not deps.active(buf) or not config().enabled then
    return false
  end
  if row == nil then
    row, col = cursor()
  end
  -- copilotInlineEdit positions are UTF-16 whatever was negotiated (as Copilot's clients assume; tabd serves them so)
  local encoding = "utf-16"
  local uri = vim.uri_from_bufnr(buf)
  local version = buf_version(buf)
  local req = { buf = buf, uri = uri, version = version, tick = api.nvim_buf_get_changedtick(buf),
    encoding = encoding, client_id = client.id, mode = mode() }
  last_asked = { buf, req.tick, row, col }
  local params = {
    textDocument = { uri = uri, version = version },
    position = { line = row, character = util.to_lsp_char(line_text(buf, row), col, encoding) },
    context = { triggerKind = kind or 2 },
  }
  -- Passing the buffer makes the client send pending didChange first: the version above is the server's.
  local ok, request_id = client_call(client, "request", METHOD, params, function(err, result)
    on_result(req, err, result)
  end, buf)
  if ok and request_id then
    req.request_id = request_id
    pending = { client_id = client.id, request_id = request_id }
    M.state.requests = M.state.requests + 1
  end
  return ok
end

-- After `debounce_ms` of quiet, in normal mode.
function M.schedule()
  if not timer then
    timer = uv.new_timer()
  end
  timer:stop()
  cancel_pending()
  timer:start(config().debounce_ms, 0, vim.schedule_wrap(function()
    if mode() == "n" then
      M.request(2)
    end
  end))
end

-- Keys ----------------------------------------------------------------------------------------------------------

local function here(buf)
  return shown ~= nil and shown.buf == (buf or api.nvim_get_current_buf())
end

-- Whether the edit on screen in `buf` keeps Tab from ghost text now: the cursor is where the edit was shown (or
-- where Tab jumped to it). A cursor moved elsewhere lets ghost text back, and the edit goes: one at a time.
function M.holds_tab(buf)
  if not here(buf) then
    return false
  end
  local row, col = cursor()
  if shown.anchor and shown.anchor[1] == row and shown.anchor[2] == col then
    return true
  end
  M.clear()
  return false
end

-- Whether the insert-mode key `lhs` goes to the next edit on screen (asked for after an accepted suggestion).
function M.takes(lhs)
  return here() and config().enabled and config().accept_key == lhs
end

-- Apply the edit on screen: its range replaced by its text, the cursor at the end of the new text, then its
-- command (tabd.acceptInlineEdit), then at once the request for the next edit from there.
function M.apply()
  local e = shown
  if not e or not api.nvim_buf_is_valid(e.buf) then
    return false
  end
  M.clear()
  local lines = split_lines(e.text)
  api.nvim_buf_set_text(e.buf, e.srow, e.scol, e.erow, e.ecol, lines)
  own_tick[e.buf] = api.nvim_buf_get_changedtick(e.buf)
  local row, col = advance(e.srow, e.scol, e.text)
  api.nvim_win_set_cursor(0, { row + 1, col }) -- normal mode shows it on the last new character
  M.state.applied = M.state.applied + 1
  if type(e.command) == "table" and e.command.command then
    execute(e.client_id, e.command.command, e.command.arguments)
  end
  -- Where the server put the cursor when it speculated: after the new text, not on its last character.
  M.request(2, row, col)
  return true
end

-- Tab: jump to an edit more than a line away, else apply it.
function M.tab()
  if not here() then
    return false
  end
  if far(shown) then
    api.nvim_win_set_cursor(0, { shown.srow + 1, shown.scol })
    shown.anchor = { cursor() }
    M.state.jumps = M.state.jumps + 1
    render(shown)
    return true
  end
  return M.apply()
end

-- The dismissal key: hide the edit and tell the server (tabd.rejectInlineEdit).
function M.reject()
  local e = shown
  if not e then
    return false
  end
  M.clear()
  local cmd = e.command
  local id = type(cmd) == "table" and cmd.arguments and cmd.arguments[1]
  if id ~= nil then
    execute(e.client_id, "tabd.rejectInlineEdit", { id })
  end
  M.state.rejected = M.state.rejected + 1
  return true
end

-- fallback: the keys sent when no edit is shown (default: the key itself, as Neovim does it).
local function map(buf, lhs, action, fallback)
  if not lhs or lhs == "" then
    return
  end
  vim.keymap.set("n", lhs, function()
    if here() then
      return "<Cmd>lua require('tabd.nes')." .. action .. "()<CR>"
    end
    return fallback or lhs
  end, { buffer = buf, expr = true, silent = true, replace_keycodes = true, desc = "tabd: next edit " .. action })
end

-- Buffers ------------------------------------------------------------------------------------------------------

function M.attach(buf)
  local c = config()
  if not c.enabled then
    return
  end
  map(buf, c.accept_key, "tab", c.accept_fallback)
  map(buf, c.dismiss_key, "reject", c.dismiss_fallback)
  local group = api.nvim_create_augroup("tabd_edit_" .. buf, { clear = true })
  api.nvim_create_autocmd("InsertLeave", {
    group = group,
    buffer = buf,
    callback = function()
      if here(buf) then
        M.clear() -- one asked in insert mode; normal mode asks again
      end
      M.schedule()
    end,
  })
  api.nvim_create_autocmd("TextChangedI", {
    group = group,
    buffer = buf,
    callback = function()
      if here(buf) and own_tick[buf] ~= api.nvim_buf_get_changedtick(buf) then
        M.clear() -- typing: the server takes an edit elsewhere as a reject
      end
    end,
  })
  api.nvim_create_autocmd("TextChanged", {
    group = group,
    buffer = buf,
    callback = function()
      if own_tick[buf] == api.nvim_buf_get_changedtick(buf) then
        return -- our own apply: its request has gone already
      end
      M.clear() -- an edit elsewhere: the server takes it as a reject
      M.schedule()
    end,
  })
  -- A pause ('updatetime'): in normal mode, and in insert mode when no suggestion is shown there (tabd proposes
  -- a rename's next place once you pause after typing the new name).
  api.nvim_create_autocmd({ "CursorHold", "CursorHoldI" }, {
    group = group,
    buffer = buf,
    callback = function()
      local row, col = cursor()
      local at = last_asked
      if not here(buf) and not deps.ghost_shown() and not (at and at[1] == buf
          and at[2] == api.nvim_buf_get_changedtick(buf) and at[3] == row and at[4] == col) then
        M.request(2)
      end
    end,
  })
  api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI" }, {
    group = group,
    buffer = buf,
    callback = function()
      if here(buf) then
        render(shown) -- the jump marker follows the cursor
      end
    end,
  })
  api.nvim_create_autocmd({ "InsertEnter", "BufLeave" }, {
    group = group,
    buffer = buf,
    callback = function()
      stop_timer()
      cancel_pending()
      if here(buf) then
        M.clear()
      end
    end,
  })
  api.nvim_create_autocmd("BufDelete", {
    group = group,
    buffer = buf,
    callback = function()
      own_tick[buf] = nil
      if here(buf) then
        shown = nil
      end
    end,
  })
end

-- Switched off (tabd/setEnabled false): nothing on screen, nothing in flight.
function M.stop()
  stop_timer()
  cancel_pending()
  M.clear()
end

function M.setup(d)
  deps = d
  vim.cmd("highlight default link TabdEditDelete DiffDelete")
  vim.cmd("highlight default link TabdEditInsert DiffAdd")
  vim.cmd("highlight default link TabdEditJump Comment")
end

function M.forget_client(id)
  unsupported[id] = nil
end

function M.is_visible()
  return shown ~= nil
end

return M
