-- tabd for Neovim: ghost text from `textDocument/inlineCompletion` (LSP 3.18).
--
-- Works from Neovim 0.7 up. The LSP client does the document sync; this file
-- asks for inline completions while you type in insert mode, draws the answer
-- as extmarks in its own namespace, and on <Tab> inserts it and tells the
-- server (`tabd.accept`), whose pre-computed next suggestion then arrives from
-- its cache. On 0.12+, where Neovim has `vim.lsp.inline_completion`, it can
-- hand the rendering to Neovim instead (`native = true`).
local M = {}

local api = vim.api
local uv = vim.uv or vim.loop

local ns = api.nvim_create_namespace("tabd")
M.ns = ns

local util = require("tabd.util")
local has, client_call, line_text = util.has, util.client_call, util.line_text
local to_lsp_char, to_byte_col, encoding_of = util.to_lsp_char, util.to_byte_col, util.encoding_of
local split_lines, cursor = util.split_lines, util.cursor

local controls = require("tabd.controls")
local nes = require("tabd.nes")

local HAS_INLINE_VIRT_TEXT = has("0.10")

M.defaults = {
  cmd = { "tabd", "serve" },
  -- Used only with a server that does not debounce: tabd says it does (experimental.tabd.debounceMs > 0),
  -- and then each keystroke asks at once, so answers from its memory are never held back by a timer.
  debounce_ms = 75,
  server_debounce = true, -- false: keep the plugin's own timer even when the server debounces
  accept_key = "<Tab>",
  accept_word_key = "<C-Right>",
  accept_line_key = false,
  dismiss_key = "<C-]>",
  -- Ask now (an invoked request, which may bring up to 3 alternatives), and cycle through them, as Copilot.
  invoke_key = "<M-\\>",
  next_key = "<M-]>",
  prev_key = "<M-[>",
  -- Which buffers tabd attaches to (one it does not attach to is never sent to the server): every filetype
  -- but `disabled_filetypes`, or only those in `filetypes` when it is a list; file globs likewise.
  filetypes = nil,
  disabled_filetypes = vim.deepcopy(controls.DISABLED_FILETYPES),
  files = nil, -- e.g. { "~/work/**" }
  disabled_files = {}, -- e.g. { "*.min.js", "vendor/**" }
  enabled = true, -- false: start switched off (:TabdToggle, :TabdEnable)
  snooze_minutes = 15, -- :TabdSnooze without a count
  init_options = {},
  -- Keys sent when the accept/dismiss key is pressed with no ghost text shown.
  accept_fallback = nil, -- default: the accept key itself (a plain Tab)
  dismiss_fallback = nil, -- default: the dismiss key itself
  hl_group = "TabdGhostText",
  -- On 0.12+: let vim.lsp.inline_completion draw and accept (no partial accept).
  native = false,
  -- Next edits (textDocument/copilotInlineEdit), in normal mode: a diff preview; Tab jumps to it when it is
  -- more than a line away, then applies it; dismiss_key hides it (tabd.rejectInlineEdit).
  next_edit = {
    enabled = true,
    accept_key = "<Tab>",
    dismiss_key = "<Esc>",
    -- Normal-mode keys sent when no edit is shown (default: the key itself, Neovim's own: <Tab> is <C-i>);
    -- e.g. "<Cmd>bnext<CR>" where your own <Tab> mapping did that.
    accept_fallback = nil,
    dismiss_fallback = nil,
    debounce_ms = 100, -- quiet after leaving insert mode or a normal-mode change before asking
    delete_hl = "TabdEditDelete", -- the text the edit removes (links to DiffDelete)
    insert_hl = "TabdEditInsert", -- the text it writes (links to DiffAdd)
    jump_hl = "TabdEditJump", -- the "⇥ Tab: line N" marker (links to Comment)
  },
}

M.config = vim.deepcopy(M.defaults)

-- Everything about the one suggestion on screen (or nil).
-- {buf, row, col, text, item, client_id, end_row, end_col, tick}
local shown = nil
-- The in-flight request: {client_id, request_id}
local pending = nil
local timer = nil
-- b:changedtick right after our own insertion; its TextChangedI is not typing.
local own_tick = {}
local client_id = nil
local follow_typing -- defined below, used by the autocommands
-- Buffers whose on_attach ran (the client is initialized and has sent didOpen).
local attached = {}

-- Numbers the plugin keeps for :checkhealth and tests.
-- last_reason: the daemon's code for the last empty answer (`tabd.reason`), nil once something shows.
M.state = { requests = 0, responses = 0, shown = 0, accepted = 0, last_latency_ms = nil, last_error = nil,
  server_debounce_ms = nil, last_reason = nil }

-- Whether the plugin asks for `buf` now: attached, still wanted (its filetype may have changed), and not
-- switched off or snoozed. A buffer that is not active sends nothing but the document sync.
local function active(buf)
  return attached[buf] == true and controls.wants(buf) and not controls.blocked(buf)
end

function M.get_client()
  if client_id then
    local client = vim.lsp.get_client_by_id(client_id)
    if client and not (client.is_stopped and client_call(client, "is_stopped")) then
      return client
    end
  end
  return nil
end

-- Ghost text --------------------------------------------------------------

local function utf8_chars(text)
  local out = {}
  for ch in text:gmatch("[%z\1-\127\192-\255][\128-\191]*") do
    out[#out + 1] = ch
  end
  return out
end

-- The text after the cursor that the suggestion replaces, when its range ends later on the cursor's line
-- (tabd: the editor's own closers, `foo(|)` + `x)` over the `)`), else "".
local function covered_text(state)
  if state.end_row ~= state.row or state.end_col <= state.col then
    return ""
  end
  return line_text(state.buf, state.row):sub(state.col + 1, state.end_col)
end

-- Where the suggestion writes the covered characters itself: the byte index in `text` of each, in order (the
-- leftmost fit, on its first line), or nil when it does not write them all. Any fit draws the same: the
-- pieces of `text` between them, drawn around the characters already there, read as `text` does.
local function covered_at(text, covered)
  local first = split_lines(text)[1]
  local at, from = {}, 1
  for _, ch in ipairs(utf8_chars(covered)) do
    local j = first:find(ch, from, true)
    if not j then
      return nil
    end
    at[#at + 1] = j
    from = j + #ch
  end
  return at
end

-- The first line of `text` cut around the covered characters: {col, piece} for each piece to draw
-- before the buffer column col (the cursor's, then just after each covered character), empty ones left out;
-- nil when `text` does not write the covered characters.
local function pieces_around(text, covered, col)
  local at = covered_at(text, covered)
  if not at then
    return nil
  end
  local first = split_lines(text)[1]
  local out, from, bcol = {}, 1, col
  local chars = utf8_chars(covered)
  for k = 1, #at + 1 do
    local stop = at[k] and at[k] - 1 or #first
    if stop >= from then
      out[#out + 1] = { bcol, first:sub(from, stop) }
    end
    if at[k] then
      from = at[k] + #chars[k]
      bcol = bcol + #chars[k]
    end
  end
  return out
end

function M.clear()
  if shown and api.nvim_buf_is_valid(shown.buf) then
    api.nvim_buf_clear_namespace(shown.buf, ns, 0, -1)
  end
  shown = nil
end

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

-- The first line's pieces when the suggestion replaces text after the cursor that it writes itself
-- ({col, piece} each), else nil: it is drawn whole at the cursor.
local function covering_pieces(state)
  local covered = covered_text(state)
  return covered ~= "" and pieces_around(state.text, covered, state.col) or nil
end

-- Whether anything of the suggestion would be drawn: one that only writes the closers already there is not.
local function has_visible_text(state)
  local pieces = covering_pieces(state)
  return state.text:find("\n", 1, true) ~= nil or (pieces and #pieces > 0) or (not pieces and state.text ~= "")
end

-- The extmarks of the first line: {col, opts} each.
local function first_line_marks(state, first, line, hl)
  local pieces = covering_pieces(state)
  if pieces and HAS_INLINE_VIRT_TEXT then
    -- Drawn around the covered characters, so `foo(|)` + `x)` reads `foo(x)`, as Tab will leave it.
    local marks = {}
    for _, p in ipairs(pieces) do
      marks[#marks + 1] = { p[1], { virt_text = { { p[2], hl } }, virt_text_pos = "inline" } }
    end
    return marks
  end
  if first == "" then
    return {}
  end
  local pos
  if HAS_INLINE_VIRT_TEXT then
    pos = "inline"
  elseif state.col >= #line or (pieces and state.end_col >= #line) then
    -- Before 0.10: over the covered closers that end the line, the suggestion drawn over them reads the same.
    pos = "overlay"
  else
    pos = "eol"
  end
  return { { state.col, { virt_text = { { first, hl } }, virt_text_pos = pos } } }
end

local function render(state)
  local lines = split_lines(state.text)
  local hl = M.config.hl_group
  local line = line_text(state.buf, state.row)
  state.line_len = #line
  local marks = first_line_marks(state, lines[1], line, hl)
  if #lines > 1 then
    local extra = {}
    for i = 2, #lines do
      -- An empty chunk list draws nothing; keep blank lines visible as blank.
      table.insert(extra, { { lines[i] == "" and " " or lines[i], hl } })
    end
    if #marks == 0 then
      marks[1] = { state.col, {} }
    end
    marks[1][2].virt_lines = extra
  end
  api.nvim_buf_clear_namespace(state.buf, ns, 0, -1)
  for _, mark in ipairs(marks) do
    mark[2].hl_mode = "combine"
    api.nvim_buf_set_extmark(state.buf, ns, state.row, mark[1], mark[2])
  end
end

function M.is_visible()
  return shown ~= nil
end

-- Whether a request is in flight (for statuslines and tests).
function M.is_pending()
  return pending ~= nil or (timer ~= nil and timer:is_active())
end

-- The suggestion on screen: {text, row, col, end_row, end_col, item} or nil (for tests and statuslines).
-- Tab puts `text` over row,col .. end_row,end_col: past the cursor when it writes the closers there itself.
-- index / count: which of the alternatives it is (count 1 when there are none).
function M.current()
  if not shown then
    return nil
  end
  return { text = shown.text, row = shown.row, col = shown.col, end_row = shown.end_row, end_col = shown.end_col,
    item = shown.item, index = shown.index or 1, count = shown.choices and #shown.choices or 1 }
end

-- Show the next (delta 1) or previous (-1) alternative, wrapping around; false when there is none.
function M.cycle(delta)
  local state = shown
  if not state or not state.choices then
    return false
  end
  local n = #state.choices
  state.index = (state.index - 1 + (delta or 1)) % n + 1
  local c = state.choices[state.index]
  state.text, state.end_row, state.end_col, state.item = c.text, c.end_row, c.end_col, c.item
  render(state)
  return true
end

function M.next_choice()
  return M.cycle(1)
end

function M.prev_choice()
  return M.cycle(-1)
end

-- Responses ---------------------------------------------------------------

local function item_text(item)
  local t = item.insertText
  if type(t) == "table" then
    -- A snippet: show and insert it without its placeholders.
    t = (t.value or ""):gsub("%$%{%d+:?([^}]*)%}", "%1"):gsub("%$%d+", "")
  end
  return type(t) == "string" and t or ""
end

-- From one item, what to draw at the cursor: the part of its text that is
-- not already typed, and where its range ends (it may replace text after the cursor).
local function ghost_from_item(item, buf, row, col, encoding)
  local text = item_text(item)
  local end_row, end_col = row, col
  if item.range then
    local s, e = item.range.start, item.range["end"]
    local srow = s.line
    local scol = to_byte_col(line_text(buf, srow), s.character, encoding)
    end_row = e.line
    end_col = to_byte_col(line_text(buf, end_row), e.character, encoding)
    if srow > row or (srow == row and scol > col) or end_row < row or (end_row == row and end_col < col) then
      return nil -- a range that does not contain the cursor: not for us
    end
    local typed = table.concat(api.nvim_buf_get_text(buf, srow, scol, row, col, {}), "\n")
    if text:sub(1, #typed) ~= typed then
      return nil
    end
    text = text:sub(#typed + 1)
  end
  local ghost = { buf = buf, row = row, col = col, text = text, end_row = end_row, end_col = end_col }
  if text == "" or not has_visible_text(ghost) then
    return nil
  end
  return ghost
end

local function in_insert_mode()
  local mode = api.nvim_get_mode().mode
  return mode:sub(1, 1) == "i"
end

local function on_result(ctx_req, err, result)
  if pending and pending.request_id == ctx_req.request_id then
    pending = nil
  end
  if err then
    if err.code ~= -32800 then -- RequestCancelled: we asked for that
      M.state.last_error = err.message or vim.inspect(err)
      M.state.last_reason = "error"
    end
    return
  end
  M.state.responses = M.state.responses + 1
  M.state.last_latency_ms = (uv.hrtime() - ctx_req.t0) / 1e6
  local buf = ctx_req.buf
  if not api.nvim_buf_is_valid(buf) or api.nvim_get_current_buf() ~= buf then
    return
  end
  local row, col = cursor()
  -- Stale answers (the user typed or moved since) are dropped.
  if row ~= ctx_req.row or col ~= ctx_req.col or api.nvim_buf_get_changedtick(buf) ~= ctx_req.tick then
    return
  end
  if not in_insert_mode() then
    return
  end
  local items = result and (result.items or result) or {}
  -- Why nothing shows (the daemon says, `tabd.reason`), kept for status() until something shows.
  local why = type(result) == "table" and type(result.tabd) == "table" and result.tabd.reason or nil
  M.state.last_reason = type(why) == "string" and why or "nothing"
  -- Every drawable item, once each: an invoked request may bring alternatives, cycled with next_key/prev_key.
  local choices, seen = {}, {}
  for _, item in ipairs(items) do
    local ghost = ghost_from_item(item, buf, row, col, ctx_req.encoding)
    if ghost and not seen[ghost.text] then
      seen[ghost.text] = true
      choices[#choices + 1] = { text = ghost.text, end_row = ghost.end_row, end_col = ghost.end_col, item = item }
    end
  end
  -- One suggestion at a time under Tab (#44): a next edit on screen keeps Tab while the cursor stays where it was
  -- shown; once the cursor has moved away, this ghost text wins and the edit goes.
  if #choices > 0 and nes.holds_tab(buf) then
    return
  end
  if #choices > 0 then
    local first = choices[1]
    shown = {
      buf = buf,
      row = row,
      col = col,
      text = first.text,
      end_row = first.end_row,
      end_col = first.end_col,
      item = first.item,
      client_id = ctx_req.client_id,
      tick = ctx_req.tick,
      choices = #choices > 1 and choices or nil,
      index = 1,
    }
    render(shown)
    M.state.shown = M.state.shown + 1
    M.state.last_reason = nil
    return
  end
  if ctx_req.after_accept then
    nes.request(2)
  end
end

-- Tell the server the user is here now (entering a buffer or insert mode): it prefills the prompt at
-- this place in the background, so the first suggestion here reuses the model's kept KV (tabd/focus).
function M.focus()
  local client = M.get_client()
  local buf = api.nvim_get_current_buf()
  if not client or not active(buf) then
    return false
  end
  local row, col = cursor()
  local character = to_lsp_char(line_text(buf, row), col, encoding_of(client))
  pcall(client_call, client, "notify", "tabd/focus",
    { uri = vim.uri_from_bufnr(buf), position = { line = row, character = character } })
  return true
end

-- Ask for a suggestion at the cursor now. kind: 1 invoked, 2 automatic. after_accept: right after a Tab,
-- when an empty answer asks for a next edit instead.
function M.request(kind, after_accept)
  stop_timer()
  cancel_pending()
  local client = M.get_client()
  local buf = api.nvim_get_current_buf()
  if not client or not active(buf) then
    return false
  end
  local row, col = cursor()
  local encoding = encoding_of(client)
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = row, character = to_lsp_char(line_text(buf, row), col, encoding) },
    context = { triggerKind = kind or 2 },
  }
  local req = {
    buf = buf,
    row = row,
    col = col,
    tick = api.nvim_buf_get_changedtick(buf),
    encoding = encoding,
    client_id = client.id,
    t0 = uv.hrtime(),
    after_accept = after_accept,
  }
  -- Passing the buffer makes the client flush pending didChange first.
  local ok, request_id = client_call(client, "request", "textDocument/inlineCompletion", params, function(err, result)
    on_result(req, err, result)
  end, buf)
  if ok and request_id then
    req.request_id = request_id
    pending = { client_id = client.id, request_id = request_id }
    M.state.requests = M.state.requests + 1
  end
  return ok
end

-- The server's own debounce floor in ms (experimental.tabd.debounceMs in its capabilities), or 0.
local function server_debounce_ms(client)
  local caps = client and client.server_capabilities or {}
  local tabd = type(caps.experimental) == "table" and caps.experimental.tabd or nil
  local ms = type(tabd) == "table" and tabd.debounceMs or 0
  return type(ms) == "number" and ms or 0
end

-- A server that debounces after its cache is asked at once: an answer from memory comes back at once, and one
-- that needs the model waits there (a newer keystroke, cancelling this request, ends that wait). Any other
-- server is asked after `debounce_ms` of quiet; each keystroke restarts the wait.
function M.schedule_request(kind)
  if not active(api.nvim_get_current_buf()) then
    return
  end
  local client = M.get_client()
  local ms = server_debounce_ms(client)
  M.state.server_debounce_ms = ms
  if M.config.server_debounce and ms > 0 then
    M.request(kind or 2)
    return
  end
  if not timer then
    timer = uv.new_timer()
  end
  timer:stop()
  cancel_pending()
  timer:start(M.config.debounce_ms, 0, vim.schedule_wrap(function()
    if in_insert_mode() then
      M.request(kind or 2)
    end
  end))
end

-- Accept / dismiss ----------------------------------------------------------

local function execute(client_id_, command, arguments)
  local client = vim.lsp.get_client_by_id(client_id_)
  if not client then
    return
  end
  client_call(client, "request", "workspace/executeCommand", {
    command = command,
    arguments = arguments,
  }, function() end)
end

local function run_item_command(state, accepted, partial)
  local cmd = state.item.command
  if type(cmd) ~= "table" or not cmd.command then
    return
  end
  local args = vim.deepcopy(cmd.arguments or {})
  if cmd.command == "tabd.accept" then
    args = { args[1], { chars = vim.fn.strchars(accepted), partial = partial } }
  end
  execute(state.client_id, cmd.command, args)
end

-- Insert `text` over [row,col .. end_row,end_col] and leave the cursor after it.
local function insert_text(buf, row, col, end_row, end_col, text)
  local lines = split_lines(text)
  api.nvim_buf_set_text(buf, row, col, end_row, end_col, lines)
  local new_row = row + #lines - 1
  local new_col = (#lines == 1 and col or 0) + #lines[#lines]
  own_tick[buf] = api.nvim_buf_get_changedtick(buf)
  api.nvim_win_set_cursor(0, { new_row + 1, new_col })
  return new_row, new_col
end

-- The word and line accept rules: VS Code's acceptNextWord / acceptNextLine, as the
-- daemon plans its prefetches (daemon/speculation/planner.py); tests/server/test_accept_rule.py
-- holds both to it.
-- Word: the leftmost word (a number like -1.5e3, or a run of characters that are
-- neither whitespace nor one of USUAL_SEPARATORS); if it starts the text, up to its
-- end, else up to its start; but never past the end of the first whitespace run.
local USUAL_SEPARATORS = "`~!@#$%^&*()-=+[{]}\\|;:'\",.<>/?"
-- JavaScript's \s beyond ASCII, as UTF-8
local UNICODE_SPACE = {}
for _, cp in ipairs({ 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff }) do
  UNICODE_SPACE[vim.fn.nr2char(cp)] = true
end
for cp = 0x2000, 0x200a do
  UNICODE_SPACE[vim.fn.nr2char(cp)] = true
end

local function is_space(ch)
  return ch:find("^[ \t\n\v\f\r]$") ~= nil or UNICODE_SPACE[ch] == true
end

local function is_word_char(ch)
  return not is_space(ch) and not (#ch == 1 and USUAL_SEPARATORS:find(ch, 1, true))
end

local function is_digit(ch)
  return ch ~= nil and ch:find("^%d$") ~= nil
end

-- The end (exclusive) of `-?\d*\.\d\w*` matched at i, or nil.
local function number_at(c, i)
  local j = i
  if c[j] == "-" then
    j = j + 1
  end
  while is_digit(c[j]) do
    j = j + 1
  end
  if c[j] ~= "." or not is_digit(c[j + 1]) then
    return nil
  end
  j = j + 2
  while c[j] ~= nil and c[j]:find("^[%w_]$") do
    j = j + 1
  end
  return j
end

function M.first_word(text)
  local c = utf8_chars(text)
  local until_ = #c
  for i = 1, #c do
    local stop = number_at(c, i)
    if not stop and is_word_char(c[i]) then
      stop = i + 1
      while c[stop] ~= nil and is_word_char(c[stop]) do
        stop = stop + 1
      end
    end
    if stop then
      until_ = (i == 1) and (stop - 1) or (i - 1)
      break
    end
  end
  for i = 1, #c do
    if is_space(c[i]) then
      local j = i
      while c[j + 1] ~= nil and is_space(c[j + 1]) do
        j = j + 1
      end
      if j < until_ then
        until_ = j
      end
      break
    end
  end
  return table.concat(c, "", 1, until_)
end

-- Line: up to and including the first line break; all of it when there is none.
function M.first_line(text)
  local nl = text:find("\n", 1, true)
  return nl and text:sub(1, nl) or text
end

-- How many bytes of the covered text after the cursor `part` (a prefix of the suggestion) writes itself.
local function covered_by(state, part)
  local covered = covered_text(state)
  local at = covered ~= "" and covered_at(state.text, covered) or nil
  if not at then
    return 0
  end
  local chars, n = utf8_chars(covered), 0
  for k, j in ipairs(at) do
    if j > #part then
      break
    end
    n = n + #chars[k]
  end
  return n
end

-- Accept `part` (a prefix of the ghost text) or all of it.
local function accept(part)
  local state = shown
  if not state then
    return false
  end
  local buf = state.buf
  api.nvim_buf_clear_namespace(buf, ns, 0, -1)
  local full = part == nil or part == state.text
  part = part or state.text
  if full then
    shown = nil
    insert_text(buf, state.row, state.col, state.end_row, state.end_col, part)
    run_item_command(state, part, false)
    M.state.accepted = M.state.accepted + 1
    -- The server has pre-computed what comes next: ask at once, no debounce; if it has no suggestion
    -- there, it may have a next edit (asked for then).
    M.request(2, true)
    return true
  end
  -- A part that writes covered closers goes over them, as the whole would.
  local over = covered_by(state, part)
  local new_row, new_col = insert_text(buf, state.row, state.col, state.row, state.col + over, part)
  run_item_command(state, part, true)
  -- The range end moves with the inserted text.
  if state.end_row == state.row then
    state.end_col = new_col + (state.end_col - state.col - over)
  end
  state.end_row = state.end_row + (new_row - state.row)
  state.row, state.col = new_row, new_col
  state.text = state.text:sub(#part + 1)
  state.choices, state.index = nil, 1 -- the others do not start with what was accepted
  state.tick = api.nvim_buf_get_changedtick(buf)
  if not has_visible_text(state) then
    -- What is left only writes the closers already there: ask for what comes next, as after a whole accept.
    M.clear()
    M.request(2)
    return true
  end
  render(state)
  return true
end

function M.accept()
  return accept(nil)
end

function M.accept_word()
  return shown ~= nil and accept(M.first_word(shown.text))
end

function M.accept_line()
  return shown ~= nil and accept(M.first_line(shown.text))
end

function M.dismiss()
  local state = shown
  if not state then
    return false
  end
  M.clear()
  local cmd = state.item.command
  local id = type(cmd) == "table" and cmd.arguments and cmd.arguments[1]
  if id ~= nil then
    execute(state.client_id, "tabd.dismiss", { id })
  end
  return true
end

-- Stats from the server: `tabd/stats` (nil when no client answers in time).
function M.stats(timeout_ms)
  local client = M.get_client()
  if not client then
    return nil, "tabd is not running"
  end
  local resp, err = client_call(client, "request_sync", "tabd/stats", vim.empty_dict(), timeout_ms or 2000)
  if not resp then
    return nil, err or "no answer"
  end
  if resp.err then
    return nil, resp.err.message or vim.inspect(resp.err)
  end
  return resp.result
end

-- Keys -----------------------------------------------------------------------

-- Expression mappings cannot change text (textlock), so they answer with a
-- <Cmd> that does, or with the fallback keys when nothing is shown.
local function expr_map(buf, lhs, action, fallback)
  if not lhs or lhs == "" then
    return
  end
  vim.keymap.set("i", lhs, function()
    if shown and shown.buf == api.nvim_get_current_buf() then
      return "<Cmd>lua require('tabd')." .. action .. "()<CR>"
    end
    if action == "accept" and nes.takes(lhs) then
      return "<Cmd>lua require('tabd.nes').tab()<CR>" -- a next edit shown after an accept: jump or apply
    end
    return fallback or lhs
  end, { buffer = buf, expr = true, silent = true, replace_keycodes = true, desc = "tabd: " .. action })
end

local function map_keys(buf)
  local c = M.config
  expr_map(buf, c.accept_key, "accept", c.accept_fallback)
  expr_map(buf, c.accept_word_key, "accept_word", nil)
  expr_map(buf, c.accept_line_key, "accept_line", nil)
  expr_map(buf, c.dismiss_key, "dismiss", c.dismiss_fallback)
  expr_map(buf, c.next_key, "next_choice", nil)
  expr_map(buf, c.prev_key, "prev_choice", nil)
  if c.invoke_key and c.invoke_key ~= "" then
    vim.keymap.set("i", c.invoke_key, function()
      M.request(1)
    end, { buffer = buf, silent = true, desc = "tabd: ask for a suggestion now (alternatives)" })
  end
end

-- Native (0.12+) -------------------------------------------------------------

local function native_available()
  return M.config.native and vim.lsp.inline_completion ~= nil and vim.lsp.inline_completion.enable ~= nil
end

local function attach_native(buf)
  vim.lsp.inline_completion.enable(true, { bufnr = buf })
  if M.config.accept_key then
    vim.keymap.set("i", M.config.accept_key, function()
      if not vim.lsp.inline_completion.get() then
        return M.config.accept_fallback or M.config.accept_key
      end
    end, { buffer = buf, expr = true, replace_keycodes = true, desc = "tabd: accept" })
  end
end

-- Typing the suggestion's own next characters keeps the rest of it on
-- screen, so it does not flicker while the server answers the new position.
function follow_typing(buf)
  local state = shown
  if not state or state.buf ~= buf then
    return false
  end
  local row, col = cursor()
  local tick = api.nvim_buf_get_changedtick(buf)
  if row == state.row and col == state.col then
    return state.tick == tick
  end
  if row ~= state.row or col < state.col then
    return false
  end
  local line = line_text(buf, row)
  local typed = line:sub(state.col + 1, col)
  if typed == "" or #typed >= #state.text or state.text:sub(1, #typed) ~= typed then
    return false
  end
  if tick == state.tick then
    -- No change: the cursor stepped over closers the suggestion writes itself (an autopairs overtype).
    if state.end_row ~= row or col > state.end_col or #line ~= state.line_len then
      return false
    end
  elseif #line ~= state.line_len + #typed then
    return false -- more than the typed text changed (an autopairs `(` also put its `)` there)
  elseif state.end_row == row then
    state.end_col = state.end_col + #typed
  end
  state.col = col
  state.text = state.text:sub(#typed + 1)
  state.choices, state.index = nil, 1
  state.tick = tick
  if not has_visible_text(state) then
    return false -- what is left only writes the closers already there
  end
  if covered_text(state) ~= "" and not covering_pieces(state) then
    return false -- a covered closer typed again instead of stepped over: the range no longer fits, ask anew
  end
  render(state)
  return true
end

-- Per buffer, {row, col, tick} at the last insert-mode event: a step right over a closer with no change since
-- is an autopairs overtype of `)`, which changes no text, so no TextChangedI asks for the next suggestion.
local last_seen = {}
local CLOSER_CHARS = ")]}\"'`"

local function note_position(buf)
  local row, col = cursor()
  last_seen[buf] = { row, col, api.nvim_buf_get_changedtick(buf) }
end

local function stepped_over_closer(buf)
  local seen = last_seen[buf]
  note_position(buf)
  local now = last_seen[buf]
  if not seen or seen[3] ~= now[3] or seen[1] ~= now[1] or now[2] ~= seen[2] + 1 then
    return false
  end
  local ch = line_text(buf, now[1]):sub(now[2], now[2])
  return ch ~= "" and CLOSER_CHARS:find(ch, 1, true) ~= nil
end

-- Client -------------------------------------------------------------------

function M.is_attached(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  return attached[buf] == true and M.get_client() ~= nil
end

-- Clients that have heard the global switches (a server starts with everything on).
local synced = {}

local function notify_enabled(client, params)
  pcall(client_call, client, "notify", "tabd/setEnabled", params)
end

local function on_attach(client, buf)
  if attached[buf] then
    return
  end
  attached[buf] = true
  if not synced[client.id] then
    synced[client.id] = true
    for _, params in ipairs(controls.sync_params()) do
      if not params.uri or params.uri == vim.uri_from_bufnr(buf) then
        notify_enabled(client, params)
      end
    end
  elseif controls.blocked(buf) == "disabled in this buffer" then
    notify_enabled(client, { enabled = false, uri = vim.uri_from_bufnr(buf) })
  end
  nes.attach(buf)
  local focus_group = api.nvim_create_augroup("tabd_focus_" .. buf, { clear = true })
  api.nvim_create_autocmd({ "BufEnter", "InsertEnter" }, {
    group = focus_group,
    buffer = buf,
    callback = function()
      M.focus()
    end,
  })
  api.nvim_create_autocmd("BufEnter", {
    group = focus_group,
    buffer = buf,
    callback = function()
      local c = M.get_client()
      if c and active(buf) then -- next edits: the document the user is in now
        pcall(client_call, c, "notify", "textDocument/didFocus", { textDocument = { uri = vim.uri_from_bufnr(buf) } })
      end
    end,
  })
  if native_available() then
    attach_native(buf)
    return
  end
  map_keys(buf)
  local group = api.nvim_create_augroup("tabd_buf_" .. buf, { clear = true })
  -- Neovim runs CursorMovedI before TextChangedI after a keystroke.
  api.nvim_create_autocmd("CursorMovedI", {
    group = group,
    buffer = buf,
    callback = function()
      local overtype = stepped_over_closer(buf)
      if shown and not follow_typing(buf) then
        M.clear()
      end
      if overtype then
        M.schedule_request(2) -- the suggestion after the `)`, as after any keystroke
      end
    end,
  })
  api.nvim_create_autocmd("InsertEnter", {
    group = group,
    buffer = buf,
    callback = function()
      note_position(buf)
    end,
  })
  api.nvim_create_autocmd("TextChangedI", {
    group = group,
    buffer = buf,
    callback = function()
      note_position(buf)
      if own_tick[buf] == api.nvim_buf_get_changedtick(buf) then
        return
      end
      if shown and not follow_typing(buf) then
        M.clear()
      end
      M.schedule_request(2)
    end,
  })
  api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = group,
    buffer = buf,
    callback = function()
      stop_timer()
      cancel_pending()
      M.dismiss()
    end,
  })
  api.nvim_create_autocmd("BufDelete", {
    group = group,
    buffer = buf,
    callback = function()
      attached[buf] = nil
      own_tick[buf] = nil
      last_seen[buf] = nil
      controls.forget(buf)
    end,
  })
end

local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.textDocument = caps.textDocument or {}
  caps.textDocument.inlineCompletion = { dynamicRegistration = false }
  return caps
end

local function client_config()
  local c = M.config
  return {
    name = "tabd",
    cmd = c.cmd,
    root_dir = vim.fn.getcwd(),
    init_options = c.init_options,
    capabilities = capabilities(),
    on_attach = on_attach,
    on_exit = vim.schedule_wrap(function()
      synced = {}
      client_id = nil
      attached = {}
      pending = nil
      M.clear()
      nes.stop()
    end),
  }
end

-- Whether `vim.lsp.enable('tabd')` (0.11+, lsp/tabd.lua) starts the client: the plugin then starts none of its own
-- and takes that one when it attaches (LspAttach).
local function native_config_enabled()
  return vim.lsp.is_enabled ~= nil and vim.lsp.is_enabled("tabd")
end

-- Attach tabd to a buffer, starting the server the first time.
function M.attach(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  if attached[buf] and M.get_client() then
    return client_id
  end
  if native_config_enabled() then
    return nil -- vim.lsp.enable's own FileType autocommand starts or reuses it; LspAttach brings it here
  end
  if type(M.config.cmd) == "table" and vim.fn.executable(M.config.cmd[1]) ~= 1 then
    M.state.last_error = "not executable: " .. tostring(M.config.cmd[1])
    return nil
  end
  local client = M.get_client()
  if client then
    vim.lsp.buf_attach_client(buf, client.id)
    return client.id
  end
  if has("0.8") then
    client_id = vim.lsp.start(client_config(), {
      bufnr = buf,
      reuse_client = function(c)
        return c.name == "tabd"
      end,
    })
  else
    client_id = vim.lsp.start_client(client_config())
    if client_id then
      vim.lsp.buf_attach_client(buf, client_id)
    end
  end
  return client_id
end

-- Switches -------------------------------------------------------------------

-- Each change of a switch reaches the server as tabd/setEnabled (so a disabled document costs it nothing);
-- switching off also drops what is on screen and in flight.
controls.on_change = function(params)
  if params.enabled == false then
    local here = vim.uri_from_bufnr(api.nvim_get_current_buf())
    if not params.uri or params.uri == here or (shown and params.uri == vim.uri_from_bufnr(shown.buf)) then
      stop_timer()
      cancel_pending()
      M.clear()
      nes.stop()
    end
  end
  local client = M.get_client()
  if client then
    notify_enabled(client, params)
  end
end

-- Suggestions may come back: in insert mode, ask at the cursor at once rather than at the next keystroke.
controls.on_resume = function()
  if in_insert_mode() then
    M.schedule_request(2)
  end
end

local function current_if(this_buffer)
  return this_buffer and api.nvim_get_current_buf() or nil
end

-- enable({buffer = true}) / disable / toggle: everywhere by default, or the current buffer only.
function M.enable(opts)
  controls.enable(current_if(opts and opts.buffer))
end

function M.disable(opts)
  controls.disable(current_if(opts and opts.buffer))
end

function M.toggle(opts)
  return controls.toggle(current_if(opts and opts.buffer))
end

-- Off everywhere for `minutes` (default: the snooze_minutes option; fractions allowed), back by itself after.
-- A count of 0 or less, or not a number, is reported (vim.notify, ERROR) and ignored. Returns true or false.
function M.snooze(minutes)
  local ok, err = controls.snooze(minutes == nil and M.config.snooze_minutes or minutes)
  if not ok then
    vim.notify("tabd: " .. err, vim.log.levels.ERROR)
  end
  return ok
end

-- Whether `buf` (default: current) gets suggestions now.
function M.is_enabled(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  return controls.wants(buf) and not controls.blocked(buf)
end

-- What tabd is doing for `buf` (default: current), in words, for a statusline or :TabdStatus:
-- "not running", "off for filetype help", "disabled", "snoozed (14 min left)", "disabled in this buffer",
-- "suggestion shown", the reason the last answer was empty ("unsure", "waiting for typing to pause",
-- "excluded file", "model loading", "engine unreachable", ...), or "ready".
function M.status(buf)
  buf = (buf == nil or buf == 0) and api.nvim_get_current_buf() or buf
  local wanted, why = controls.wants(buf)
  if not wanted then
    return why
  end
  local blocked = controls.blocked(buf)
  if blocked == "snoozed" then
    local left = controls.snooze_left() or 0
    return left >= 60 and string.format("snoozed (%d min left)", math.ceil(left / 60))
      or string.format("snoozed (%d s left)", math.ceil(left))
  elseif blocked then
    return blocked
  end
  if not M.get_client() then
    return M.state.last_error and ("not running: " .. M.state.last_error) or "not running"
  end
  if not attached[buf] then
    return "not attached"
  end
  if shown and shown.buf == buf then
    return "suggestion shown"
  end
  if (nes.current() or {}).buf == buf then
    return "next edit shown"
  end
  if M.state.last_reason then
    return controls.reason_words(M.state.last_reason)
  end
  return "ready"
end

local function notify_switch(on, this_buffer)
  vim.notify("tabd: " .. (on and "enabled" or "disabled") .. (this_buffer and " in this buffer" or ""),
    vim.log.levels.INFO)
end

local function create_commands()
  api.nvim_create_user_command("TabdStats", function()
    local stats, err = M.stats(3000)
    print(stats and vim.inspect(stats) or ("tabd: " .. tostring(err)))
  end, { desc = "tabd: show the daemon's tabd/stats" })
  api.nvim_create_user_command("TabdToggle", function(o)
    notify_switch(M.toggle({ buffer = o.bang }), o.bang)
  end, { bang = true, desc = "tabd: suggestions off/on (with !: in this buffer only)" })
  api.nvim_create_user_command("TabdEnable", function(o)
    M.enable({ buffer = o.bang })
    notify_switch(true, o.bang)
  end, { bang = true, desc = "tabd: suggestions on (with !: in this buffer)" })
  api.nvim_create_user_command("TabdDisable", function(o)
    M.disable({ buffer = o.bang })
    notify_switch(false, o.bang)
  end, { bang = true, desc = "tabd: suggestions off (with !: in this buffer only)" })
  api.nvim_create_user_command("TabdSnooze", function(o)
    local minutes = nil
    if o.args ~= "" then
      minutes = tonumber(o.args)
      if not minutes then
        vim.notify("tabd: :TabdSnooze takes a number of minutes, got " .. o.args, vim.log.levels.ERROR)
        return
      end
    end
    if M.snooze(minutes) then
      vim.notify(string.format("tabd: snoozed for %s min", tostring(minutes or M.config.snooze_minutes)),
        vim.log.levels.INFO)
    end
  end, { nargs = "?", desc = "tabd: suggestions off for N minutes (default snooze_minutes)" })
  api.nvim_create_user_command("TabdStatus", function()
    print("tabd: " .. M.status())
  end, { desc = "tabd: what tabd is doing here, in words" })
end

-- Options whose value is a list: the user's list replaces the default one rather than merging into it.
local LIST_OPTIONS = { "cmd", "filetypes", "disabled_filetypes", "files", "disabled_files" }

function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  for _, name in ipairs(LIST_OPTIONS) do
    if opts and opts[name] ~= nil then
      M.config[name] = opts[name]
    end
  end
  if type(M.config.next_edit) ~= "table" then -- next_edit = false: off
    M.config.next_edit = vim.tbl_extend("force", vim.deepcopy(M.defaults.next_edit), { enabled = false })
  end
  local problems = controls.configure(M.config)
  if type(M.config.snooze_minutes) ~= "number" or M.config.snooze_minutes <= 0 then
    M.config.snooze_minutes = M.defaults.snooze_minutes
  end
  for _, problem in ipairs(problems) do
    vim.notify("tabd: " .. problem, vim.log.levels.WARN)
  end
  vim.cmd("highlight default link TabdGhostText Comment")
  nes.setup({
    get_client = M.get_client,
    active = active,
    config = function()
      return M.config.next_edit
    end,
    ghost_shown = function()
      return shown ~= nil
    end,
    hide_ghost = function()
      M.clear()
    end,
  })
  create_commands()
  local group = api.nvim_create_augroup("tabd", { clear = true })
  -- FileType when a file is read or its filetype set; BufEnter for a buffer whose filetype stays empty.
  api.nvim_create_autocmd({ "FileType", "BufEnter" }, {
    group = group,
    callback = function(args)
      if not attached[args.buf] and api.nvim_buf_is_loaded(args.buf) and controls.wants(args.buf) then
        M.attach(args.buf)
      end
    end,
  })
  if has("0.8") then
    -- A client named tabd that the plugin did not start (vim.lsp.enable('tabd'), or a config of the user's own):
    -- the plugin draws, accepts and asks for next edits through it as through its own.
    api.nvim_create_autocmd("LspAttach", {
      group = group,
      callback = function(args)
        local client = vim.lsp.get_client_by_id(args.data and args.data.client_id or -1)
        if client and client.name == "tabd" and controls.wants(args.buf) then
          client_id = client.id
          on_attach(client, args.buf)
        end
      end,
    })
    api.nvim_create_autocmd("LspDetach", {
      group = group,
      callback = function(args)
        local id = args.data and args.data.client_id
        if id ~= nil and id == client_id then
          attached[args.buf] = nil -- attached again by the next LspAttach (a restarted client)
          if shown and shown.buf == args.buf then
            M.clear()
          end
        end
      end,
    })
  end
  -- Buffers already open that tabd wants.
  for _, buf in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(buf) and controls.wants(buf) then
      M.attach(buf)
    end
  end
end

return M
