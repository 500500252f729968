-- What the plugin's modules share: Neovim version checks, client calls that work on 0.7 and 0.11,
-- and conversions between buffer byte columns and LSP characters in the negotiated encoding.
local M = {}

local api = vim.api

function M.has(version)
  return vim.fn.has("nvim-" .. version) == 1
end

-- 0.11 turned client methods into `client:method()` and deprecates the dot form.
local COLON_METHODS = M.has("0.11")

function M.client_call(client, method, ...)
  if COLON_METHODS then
    return client[method](client, ...)
  end
  return client[method](...)
end

function M.line_text(buf, row)
  return api.nvim_buf_get_lines(buf, row, row + 1, false)[1] or ""
end

function M.split_lines(text)
  return vim.split(text, "\n", { plain = true })
end

function M.encoding_of(client)
  return client.offset_encoding or "utf-16"
end

-- byte column -> LSP character in the negotiated encoding
function M.to_lsp_char(line, byte_col, encoding)
  byte_col = math.min(byte_col, #line)
  if encoding == "utf-8" then
    return byte_col
  end
  local ok, idx
  if M.has("0.11") then
    ok, idx = pcall(vim.str_utfindex, line, encoding, byte_col, false)
  else
    local ok2, u32, u16 = pcall(vim.str_utfindex, line, byte_col)
    ok, idx = ok2, (encoding == "utf-16" and u16 or u32)
  end
  return ok and idx or byte_col
end

-- LSP character in the negotiated encoding -> byte column
function M.to_byte_col(line, character, encoding)
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  local ok, col
  if M.has("0.11") then
    ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  else
    ok, col = pcall(vim.str_byteindex, line, character, encoding == "utf-16")
  end
  if not ok or col == nil then
    return #line
  end
  return math.min(col, #line)
end

function M.cursor()
  local pos = api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

return M
