-- tabd's switches: which buffers the plugin attaches to at all (filetypes, file globs), and whether it asks
-- now (on/off for everything or for one buffer, snooze for N minutes), with the words for why nothing shows.
-- Nothing here talks to the server: each change calls `M.on_change` with the params of the contract's
-- `tabd/setEnabled` notification, and `M.on_resume` when suggestions may come back; init.lua sends and asks.
local M = {}

local uv = vim.uv or vim.loop

-- Buffers that are not code someone types in, or where a suggestion is in the way ("" = no filetype).
M.DISABLED_FILETYPES = { "", "help", "gitcommit", "gitrebase", "hgcommit", "svn", "cvs", "TelescopePrompt",
  "TelescopeResults", "NvimTree", "neo-tree", "qf", "netrw", "fugitive", "lazy", "mason", "checkhealth" }

-- The daemon's empty-answer reasons (`tabd.reason` in an inlineCompletion result), in words.
M.REASONS = {
  unsure = "unsure",
  debounced = "waiting for typing to pause",
  superseded = "superseded by newer typing",
  excluded = "excluded file",
  disabled = "disabled",
  loading = "model loading",
  unreachable = "engine unreachable",
  slow = "engine slow",
  error = "error",
  nothing = "nothing to suggest",
}

function M.reason_words(code)
  return M.REASONS[code] or tostring(code)
end

M.on_change = function(_) end
M.on_resume = function() end

local rules = { filetypes = nil, disabled_filetypes = {}, files = nil, disabled_files = {} }
local state = { enabled = true, snooze_until = nil, timer = nil, off = {} }

-- Globs -------------------------------------------------------------------------------------------------

-- A glob whose brackets do not close is a typo, not a pattern: it is reported and left out.
local function unbalanced(glob)
  local depth = { ["["] = 0, ["{"] = 0 }
  local close = { ["]"] = "[", ["}"] = "{" }
  for ch in glob:gmatch(".") do
    if depth[ch] then
      depth[ch] = depth[ch] + 1
    elseif close[ch] then
      depth[close[ch]] = depth[close[ch]] - 1
      if depth[close[ch]] < 0 then
        return true
      end
    end
  end
  return depth["["] ~= 0 or depth["{"] ~= 0
end

-- One glob as {base, pattern}: a glob without `/` matches the file name (`*.min.js`, `.env*`); one with `/`
-- matches the end of the full path (`vendor/**`, `**/generated/*.go`) or, from `/` or `~`, the whole of it.
local function compile_glob(glob)
  if type(glob) ~= "string" or glob == "" then
    return nil, "not a glob: " .. vim.inspect(glob)
  end
  if unbalanced(glob) then
    return nil, "glob does not parse (unbalanced [ or {): " .. glob
  end
  local base = glob:find("/", 1, true) == nil
  local g = glob
  if g:sub(1, 1) == "~" then
    g = (vim.env.HOME or "") .. g:sub(2)
  elseif not base and g:sub(1, 1) ~= "/" then
    g = "**/" .. g
  end
  local ok, pat = pcall(vim.fn.glob2regpat, g)
  if not ok or type(pat) ~= "string" then
    return nil, "glob does not parse: " .. glob
  end
  pat = "\\C" .. pat -- file names are case-sensitive, whatever 'ignorecase' says
  local ok2, err = pcall(vim.fn.match, "/x", pat)
  if not ok2 then
    return nil, "glob does not parse: " .. glob .. " (" .. tostring(err) .. ")"
  end
  return { glob = glob, base = base, pattern = pat }
end

local function glob_matches(compiled, path)
  local subject = compiled.base and vim.fn.fnamemodify(path, ":t") or path
  return vim.fn.match(subject, compiled.pattern) >= 0
end

local function any_match(list, path)
  for _, c in ipairs(list) do
    if glob_matches(c, path) then
      return c.glob
    end
  end
  return nil
end

-- Options -----------------------------------------------------------------------------------------------

local function string_list(value, name, problems)
  if value == nil then
    return nil
  end
  if type(value) ~= "table" then
    problems[#problems + 1] = name .. " must be a list of strings, got " .. type(value)
    return false
  end
  local out = {}
  for _, v in ipairs(value) do
    if type(v) == "string" then
      out[#out + 1] = v
    else
      problems[#problems + 1] = name .. ": not a string, ignored: " .. vim.inspect(v)
    end
  end
  return out
end

local function glob_list(value, name, problems)
  local list = string_list(value, name, problems)
  if not list then
    return list
  end
  local out = {}
  for _, g in ipairs(list) do
    local c, err = compile_glob(g)
    if c then
      out[#out + 1] = c
    else
      problems[#problems + 1] = name .. ": " .. err .. ", ignored"
    end
  end
  return out
end

-- Read the options (filetypes, disabled_filetypes, files, disabled_files, enabled); returns the problems,
-- each to report, the bad value being ignored (its default kept).
function M.configure(config)
  local problems = {}
  local ft = string_list(config.filetypes, "filetypes", problems)
  rules.filetypes = ft or nil
  local dft = string_list(config.disabled_filetypes, "disabled_filetypes", problems)
  rules.disabled_filetypes = dft or vim.deepcopy(M.DISABLED_FILETYPES)
  local files = glob_list(config.files, "files", problems)
  rules.files = files or nil
  rules.disabled_files = glob_list(config.disabled_files, "disabled_files", problems) or {}
  if config.enabled ~= nil and type(config.enabled) ~= "boolean" then
    problems[#problems + 1] = "enabled must be true or false, got " .. vim.inspect(config.enabled)
  else
    state.enabled = config.enabled ~= false
  end
  if type(config.snooze_minutes) ~= "number" or config.snooze_minutes <= 0 then
    problems[#problems + 1] = "snooze_minutes must be a number > 0, got " .. vim.inspect(config.snooze_minutes)
  end
  return problems
end

-- Whether the plugin attaches to `buf` at all: true, or false and why. A buffer it does not attach to is
-- never sent to the server.
function M.wants(buf)
  if vim.bo[buf].buftype ~= "" then
    return false, "not a file buffer"
  end
  local ft = vim.bo[buf].filetype
  if vim.tbl_contains(rules.disabled_filetypes, ft) or (rules.filetypes and not vim.tbl_contains(rules.filetypes, ft)) then
    return false, "off for filetype " .. (ft == "" and "(none)" or ft)
  end
  local path = vim.api.nvim_buf_get_name(buf)
  if path ~= "" then
    local glob = any_match(rules.disabled_files, path)
    if glob then
      return false, "off for this file (" .. glob .. ")"
    end
    if rules.files and not any_match(rules.files, path) then
      return false, "off for this file (not in files)"
    end
  end
  return true
end

-- Switches ------------------------------------------------------------------------------------------------

local function now_s()
  return uv.hrtime() / 1e9
end

local function uri(buf)
  return vim.uri_from_bufnr(buf)
end

-- Seconds of snooze left, or nil.
function M.snooze_left()
  return state.snooze_until and math.max(0, state.snooze_until - now_s()) or nil
end

-- Why `buf` gets no suggestions now from the switches ("disabled", "snoozed", "disabled in this buffer"), or nil.
function M.blocked(buf)
  if not state.enabled then
    return "disabled"
  end
  if state.snooze_until then
    return "snoozed"
  end
  if buf and state.off[buf] then
    return "disabled in this buffer"
  end
  return nil
end

local function stop_snooze()
  if state.timer then
    state.timer:stop()
    state.timer:close()
    state.timer = nil
  end
  state.snooze_until = nil
end

-- What a server that just started (or one told "every document on") must hear to match the switches.
function M.sync_params()
  local out = {}
  if not state.enabled then
    out[#out + 1] = { enabled = false }
  elseif state.snooze_until then
    out[#out + 1] = { enabled = false, minutes = math.max(M.snooze_left(), 0.001) / 60 }
  end
  for buf in pairs(state.off) do
    if vim.api.nvim_buf_is_valid(buf) then
      out[#out + 1] = { enabled = false, uri = uri(buf) }
    end
  end
  return out
end

-- The global switch on again: the server hears it, then the buffers still off (a uri-less setEnabled may
-- switch every document on there).
local function resume_all()
  M.on_change({ enabled = true })
  for buf in pairs(state.off) do
    if vim.api.nvim_buf_is_valid(buf) then
      M.on_change({ enabled = false, uri = uri(buf) })
    end
  end
  M.on_resume()
end

-- enable(nil): everywhere (and the snooze ends); enable(buf): that buffer.
function M.enable(buf)
  if buf then
    if state.off[buf] then
      state.off[buf] = nil
      M.on_change({ enabled = true, uri = uri(buf) })
      M.on_resume()
    end
    return
  end
  local was = M.blocked(nil)
  stop_snooze()
  state.enabled = true
  if was then
    resume_all()
  end
end

function M.disable(buf)
  if buf then
    if not state.off[buf] then
      state.off[buf] = true
      M.on_change({ enabled = false, uri = uri(buf) })
    end
    return
  end
  stop_snooze()
  state.enabled = false
  M.on_change({ enabled = false })
end

-- Off if on, on if off or snoozed. Returns whether suggestions are now on there.
function M.toggle(buf)
  if buf then
    if state.off[buf] then
      M.enable(buf)
    else
      M.disable(buf)
    end
    return not state.off[buf]
  end
  if M.blocked(nil) then
    M.enable(nil)
    return true
  end
  M.disable(nil)
  return false
end

-- Off for `minutes` (fractions allowed), everywhere; back by itself after. Returns true, or false and why.
function M.snooze(minutes)
  if type(minutes) ~= "number" or minutes ~= minutes or minutes == math.huge then
    return false, "snooze needs a number of minutes, got " .. vim.inspect(minutes)
  end
  if minutes <= 0 then
    return false, string.format("snooze needs minutes > 0, got %s", tostring(minutes))
  end
  stop_snooze()
  state.enabled = true
  state.snooze_until = now_s() + minutes * 60
  state.timer = uv.new_timer()
  state.timer:start(math.max(1, math.floor(minutes * 60000 + 0.5)), 0, vim.schedule_wrap(function()
    if state.snooze_until then
      stop_snooze()
      resume_all()
    end
  end))
  M.on_change({ enabled = false, minutes = minutes })
  return true
end

function M.forget(buf)
  state.off[buf] = nil
end

return M
