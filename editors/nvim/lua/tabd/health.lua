-- :checkhealth tabd — is the daemon there, running, and serving from its cache?
local M = {}

-- vim.health.start/ok/... on 0.9+, vim.health.report_* on 0.8, require("health") on 0.7.
local function reporter()
  local h = vim.health or require("health")
  return {
    start = h.start or h.report_start,
    ok = h.ok or h.report_ok,
    info = h.info or h.report_info,
    warn = h.warn or h.report_warn,
    error = h.error or h.report_error,
  }
end

local function fmt_ms(v)
  return type(v) == "number" and string.format("%.1f ms", v) or "n/a"
end

function M.check()
  local report = reporter()
  local tabd = require("tabd")
  local cfg = tabd.config
  report.start("tabd")

  local exe = type(cfg.cmd) == "table" and cfg.cmd[1] or nil
  if exe and vim.fn.executable(exe) == 1 then
    report.ok("tabd executable found: " .. vim.fn.exepath(exe) .. " (cmd: " .. table.concat(cfg.cmd, " ") .. ")")
  elseif exe then
    report.error("tabd executable not found: " .. exe, { "pip install tabd, or set cmd in require('tabd').setup{}" })
  else
    report.info("cmd is a function; not checked")
  end

  local client = tabd.get_client()
  if not client then
    report.warn("tabd client is not running", {
      cfg.filetypes and ("open a file of one of these filetypes: " .. table.concat(cfg.filetypes, ", "))
        or "open a file whose filetype is not in disabled_filetypes",
      tabd.state.last_error and ("last error: " .. tabd.state.last_error) or "call require('tabd').setup{} in your config",
    })
    return
  end
  report.ok(string.format("client running (id %d, position encoding %s)", client.id, client.offset_encoding or "utf-16"))

  report.info("status here: " .. tabd.status())
  local s = tabd.state
  report.info(string.format("this session: %d requests, %d shown, %d accepted, last latency %s",
    s.requests, s.shown, s.accepted, fmt_ms(s.last_latency_ms)))
  local e = require("tabd.nes").state
  report.info(string.format("next edits: %s; %d asked, %d shown, %d applied, %d jumps, %d rejected",
    cfg.next_edit and cfg.next_edit.enabled and "on" or "off", e.requests, e.shown, e.applied, e.jumps, e.rejected))

  local stats, err = tabd.stats(2000)
  if not stats then
    report.warn("tabd/stats did not answer: " .. tostring(err))
    return
  end
  report.ok("model: " .. tostring(stats.model))
  local last = stats.last or {}
  report.info(string.format("last completion: source %s, latency %s", tostring(last.source), fmt_ms(last.latency_ms)))
  local aa = stats.after_accept or {}
  if (aa.requests or 0) > 0 then
    report.ok(string.format("after-accept hit rate: %.0f%% (%d of %d from cache, p50 %s)",
      100 * (aa.hit_rate or 0), aa.from_cache or 0, aa.requests or 0, fmt_ms(aa.p50_ms)))
  else
    report.info("after-accept hit rate: no accepts yet")
  end
  local src = stats.sources or {}
  report.info(string.format("sources: cache %d, typed %d, inflight %d, model %d, none %d",
    src.cache or 0, src.typed or 0, src.inflight or 0, src.model or 0, src.none or 0))
end

return M
