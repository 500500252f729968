-- tabd for Neovim 0.11+'s own LSP set-up: with this plugin's folder on the runtimepath,
--
--   vim.lsp.enable('tabd')
--
-- starts `tabd serve` for every file buffer (as nvim-lspconfig's lsp/<name>.lua files do); override any field with
-- vim.lsp.config('tabd', {...}), e.g. cmd = { '/path/to/.venv/bin/tabd', 'serve' } or init_options = { model = ... }.
--
-- What draws the suggestions:
-- - Neovim 0.12+: vim.lsp.inline_completion.enable() draws tabd's items, and vim.lsp.inline_completion.get()
--   (map it to <Tab>) writes the item over its range and runs its command (tabd.accept), so the next suggestion
--   comes from tabd's memory.
-- - 0.11 (and 0.12 if you prefer it): require('tabd').setup() as well. The plugin then starts no client of its
--   own: it takes this one when it attaches (LspAttach), for ghost text, Tab, partial accepts and next edits.
return {
  cmd = { 'tabd', 'serve' },
  -- nil: every filetype. tabd suggests in any language; its own switches and content exclusion decide per file.
  filetypes = nil,
  -- One daemon per project: its root names the workspace (content exclusion reads git there, context paths are
  -- relative to it). A file outside any project gets a client whose root is its own folder.
  root_markers = { '.git', 'pyproject.toml', 'package.json', 'Cargo.toml', 'go.mod', '.hg' },
  -- tabd's initialization options (README, "Configuration"): model, depth, log, exclude, minConfidence, ...
  init_options = {},
  -- Neovim 0.11 does not declare inline completion itself; 0.12 does (the same value).
  capabilities = {
    textDocument = { inlineCompletion = { dynamicRegistration = false } },
  },
  -- tabd's own clients and Copilot's expect the item's command to go back to the server (workspace/executeCommand):
  -- nothing to do on the client side.
}
