// The extension's pure logic: settings -> initializationOptions, the daemon's
// `tabd/stats` answer -> typed figures, figures -> status bar text, finding
// the executable. No `vscode` import, so
// `node --test` can load it as is.

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

/** The `tabd.*` settings as VS Code hands them over (any of them may be missing or of the wrong type). */
export interface RawSettings {
  path?: unknown;
  args?: unknown;
  model?: unknown;
  depth?: unknown;
  log?: unknown;
  statsInterval?: unknown;
}

export interface Settings {
  path: string;
  args: string[];
  model: string;
  depth: number | null;
  log: string;
  statsInterval: number;
}

/** What `initialize` carries to the daemon. Unset settings are left out so the daemon's defaults apply. */
export interface InitializationOptions {
  model?: string;
  depth?: number;
  log?: string;
  /** globs of files the daemon must never read (content exclusion), on top of its own deny list */
  exclude?: string[];
  /** globs that let files an exclude glob or git keeps out back in (never one the deny list keeps out) */
  include?: string[];
}

export const DEFAULT_STATS_INTERVAL_MS = 2000;

function asString(value: unknown, fallback: string): string {
  return typeof value === "string" ? value.trim() : fallback;
}

/** Settings with defaults filled in and bad values replaced by their default. */
export function readSettings(raw: RawSettings): Settings {
  const depth =
    typeof raw.depth === "number" && Number.isInteger(raw.depth) && raw.depth >= 0 ? raw.depth : null;
  const interval =
    typeof raw.statsInterval === "number" && Number.isFinite(raw.statsInterval) && raw.statsInterval >= 0
      ? raw.statsInterval
      : DEFAULT_STATS_INTERVAL_MS;
  return {
    path: asString(raw.path, "") || "tabd",
    args: Array.isArray(raw.args) ? raw.args.filter((a): a is string => typeof a === "string") : [],
    model: asString(raw.model, ""),
    depth,
    log: asString(raw.log, ""),
    statsInterval: interval,
  };
}

/** `~` at the start and `${workspaceFolder}` / `${userHome}` anywhere, as in VS Code's own settings. */
export function expandPath(value: string, workspaceFolder?: string, home: string = os.homedir()): string {
  let out = value;
  if (out === "~" || out.startsWith("~/")) {
    out = home + out.slice(1);
  }
  out = out.replace(/\$\{userHome\}/g, home);
  if (workspaceFolder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  }
  return out;
}

export function initializationOptions(
  settings: Settings,
  workspaceFolder?: string,
  exclude: string[] = [],
  include: string[] = [],
): InitializationOptions {
  const options: InitializationOptions = {};
  if (settings.model) {
    options.model = expandPath(settings.model, workspaceFolder);
  }
  if (settings.depth !== null) {
    options.depth = settings.depth;
  }
  if (settings.log) {
    options.log = expandPath(settings.log, workspaceFolder);
  }
  // Only when set: a daemon without content exclusion warns about an option it does not know.
  if (exclude.length > 0) {
    options.exclude = exclude;
  }
  if (include.length > 0) {
    options.include = include;
  }
  return options;
}

/** The command line after the executable. */
export function serveArgs(settings: Settings): string[] {
  return ["serve", ...settings.args];
}

export type Source = "cache" | "typed" | "inflight" | "model" | "none";
export const SOURCES: readonly Source[] = ["cache", "typed", "inflight", "model", "none"];

export interface Stats {
  model: string;
  sources: Record<Source, number>;
  prefetch: { started: number; finished: number; cancelled: number };
  afterAccept: { requests: number; fromCache: number; hitRate: number | null; p50Ms: number | null };
  /** origin: the layer that answered last, even with nothing to show (cache and typed are the daemon's memory) */
  last: { source: string; latencyMs: number | null; reason?: string; origin?: string } | null;
  /** next-edit suggestions (a daemon that serves them): how many were shown, accepted, rejected, from memory */
  edits?: { requests: number; shown: number; accepted: number; rejected: number; fromMemory: number };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : 0;
}

function maybeNumber(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/**
 * The `tabd/stats` result as typed figures, or undefined when it isn't an object.
 * Missing or malformed fields read as zero / unknown, so an older or newer daemon
 * still gets a status bar.
 */
export function parseStats(raw: unknown): Stats | undefined {
  if (!isObject(raw)) {
    return undefined;
  }
  const sourcesIn = isObject(raw.sources) ? raw.sources : {};
  const sources = Object.fromEntries(SOURCES.map((s) => [s, count(sourcesIn[s])])) as Record<Source, number>;
  const pf = isObject(raw.prefetch) ? raw.prefetch : {};
  const aa = isObject(raw.after_accept) ? raw.after_accept : {};
  const requests = count(aa.requests);
  const fromCache = count(aa.from_cache);
  let hitRate = maybeNumber(aa.hit_rate);
  if (hitRate === null && requests > 0) {
    hitRate = fromCache / requests;
  }
  if (hitRate !== null && hitRate > 1 && hitRate <= 100) {
    hitRate = hitRate / 100; // a percentage instead of a fraction
  }
  const last = isObject(raw.last) && typeof raw.last.source === "string"
    ? {
        source: raw.last.source,
        latencyMs: maybeNumber(raw.last.latency_ms),
        ...(typeof raw.last.reason === "string" ? { reason: raw.last.reason } : {}),
        ...(typeof raw.last.origin === "string" ? { origin: raw.last.origin } : {}),
      }
    : null;
  return {
    model: typeof raw.model === "string" ? raw.model : "",
    sources,
    prefetch: { started: count(pf.started), finished: count(pf.finished), cancelled: count(pf.cancelled) },
    afterAccept: { requests, fromCache, hitRate: requests > 0 ? hitRate : null, p50Ms: requests > 0 ? maybeNumber(aa.p50_ms) : null },
    last,
    ...(isObject(raw.edits)
      ? {
          edits: {
            requests: count(raw.edits.requests),
            shown: count(raw.edits.shown),
            accepted: count(raw.edits.accepted),
            rejected: count(raw.edits.rejected),
            fromMemory: count(raw.edits.from_memory),
          },
        }
      : {}),
  };
}

/** 0.42 ms, 3.1 ms, 153 ms, 1.2 s: enough digits to tell a cache hit from a model call. */
export function formatMs(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms) || ms < 0) {
    return "–";
  }
  if (ms < 1) {
    return `${ms.toFixed(2)} ms`;
  }
  if (ms < 10) {
    return `${ms.toFixed(1)} ms`;
  }
  if (ms < 1000) {
    return `${Math.round(ms)} ms`;
  }
  return `${(ms / 1000).toFixed(1)} s`;
}

export function formatPercent(fraction: number | null): string {
  if (fraction === null || !Number.isFinite(fraction)) {
    return "–";
  }
  return `${Math.round(Math.min(Math.max(fraction, 0), 1) * 100)}%`;
}

export const STATUS_ICON = "$(sparkle)";

/**
 * The Tabs pressed in this window on tabd's suggestions (the `tabd.accept` command VS Code runs on a whole accept),
 * and how the answer right after each came: from the daemon's memory or not, and how long it took there. Typing
 * through a suggestion is no Tab: the daemon's own after-accept figures count it, so they read "100% hit" before
 * any Tab was pressed.
 */
export interface TabTally {
  tabs: number;
  fromMemory: number;
  latenciesMs: number[];
}

export function newTabTally(): TabTally {
  return { tabs: 0, fromMemory: 0, latenciesMs: [] };
}

/** One Tab, by the daemon's `last` after the answer that followed it: origin cache or typed is its memory. */
export function recordTab(tally: TabTally, last: Stats["last"] | undefined): void {
  tally.tabs += 1;
  const origin = last?.origin ?? last?.source;
  if (origin === "cache" || origin === "typed") {
    tally.fromMemory += 1;
  }
  if (last?.latencyMs !== null && last?.latencyMs !== undefined) {
    tally.latenciesMs.push(last.latencyMs);
    if (tally.latenciesMs.length > 1000) {
      tally.latenciesMs.shift();
    }
  }
}

function median(values: number[]): number | null {
  if (values.length === 0) {
    return null;
  }
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Status bar text: after Tab, the median latency and the share answered from memory, the figures speculation is
 * for; counted over Tabs only. */
export function statusText(stats: Stats | undefined, tally: TabTally = newTabTally()): string {
  if (stats === undefined) {
    return `${STATUS_ICON} tabd`;
  }
  if (tally.tabs === 0) {
    return `${STATUS_ICON} tabd: no Tabs yet`;
  }
  return `${STATUS_ICON} tabd ${formatMs(median(tally.latenciesMs))} · ${formatPercent(tally.fromMemory / tally.tabs)} hit`;
}

/** Status bar tooltip, Markdown. */
export function statusTooltip(stats: Stats | undefined, control?: string, tally: TabTally = newTabTally()): string {
  if (stats === undefined) {
    return control ? `tabd: ${control}` : "tabd: no figures from the daemon yet";
  }
  const aa = stats.afterAccept;
  const tabs = tally.tabs === 1 ? "1 Tab" : `${tally.tabs} Tabs`;
  const lines = [
    `**tabd**${stats.model ? ` — model \`${stats.model}\`` : ""}`,
    "",
    ...(control ? [control, ""] : []),
    `After Tab: ${tabs}, ${tally.fromMemory} next suggestions from memory` +
      (tally.tabs ? ` (${formatPercent(tally.fromMemory / tally.tabs)}), median ${formatMs(median(tally.latenciesMs))}` : ""),
    "",
    `After any accept (the daemon's count, typing through a suggestion included): ${aa.requests} requests, ${aa.fromCache} from cache (${formatPercent(aa.hitRate)}), median ${formatMs(aa.p50Ms)}`,
    "",
    `Sources: ${SOURCES.map((s) => `${s} ${stats.sources[s]}`).join(", ")}`,
    "",
    `Prefetch: ${stats.prefetch.started} started, ${stats.prefetch.finished} finished, ${stats.prefetch.cancelled} cancelled`,
  ];
  if (stats.last) {
    lines.push("", `Last: ${stats.last.source}, ${formatMs(stats.last.latencyMs)}`);
  }
  if (stats.edits) {
    const e = stats.edits;
    lines.push("", `Next edits: ${e.shown} shown, ${e.accepted} accepted, ${e.rejected} dismissed, ${e.fromMemory} of ${e.requests} answered from memory`);
  }
  return lines.join("\n");
}

/** Whether `file` exists, is a regular file and is executable (on Windows: exists). */
function isExecutable(file: string): boolean {
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) {
      return false;
    }
    if (process.platform !== "win32") {
      fs.accessSync(file, fs.constants.X_OK);
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * The executable `command` names: itself when it contains a path separator, else
 * the first match on PATH. Undefined when there is none, so the extension can say
 * so instead of letting the client fail with a bare ENOENT.
 */
export function resolveExecutable(
  command: string,
  env: NodeJS.ProcessEnv = process.env,
  workspaceFolder?: string,
): string | undefined {
  const expanded = expandPath(command, workspaceFolder);
  const exts = process.platform === "win32" ? ["", ...(env.PATHEXT ?? ".EXE;.CMD;.BAT").split(";")] : [""];
  if (expanded.includes("/") || (process.platform === "win32" && expanded.includes("\\"))) {
    const full = path.resolve(workspaceFolder ?? process.cwd(), expanded);
    return exts.map((e) => full + e).find(isExecutable);
  }
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (!dir) {
      continue;
    }
    const found = exts.map((e) => path.join(dir, expanded + e)).find(isExecutable);
    if (found) {
      return found;
    }
  }
  return undefined;
}

export function notFoundMessage(command: string): string {
  return (
    `tabd: cannot find the tabd executable "${command}". ` +
    `Install tabd (pipx install /path/to/tabd, or make venv in the tabd repository) and set "tabd.path" ` +
    `to its full path, e.g. /path/to/tabd/.venv/bin/tabd.`
  );
}

/**
 * What to say when the daemon started but exited before it answered (a broken install, a bad argument): how it
 * ended, the last line it wrote (the error), and the fix.
 */
export function exitMessage(command: string, code: number | null, signal: string | null, lastLines: string[]): string {
  const how = signal ? `was killed by ${signal}` : code !== null ? `exited with code ${code}` : "stopped";
  const said = lastLines.filter((l) => l.trim()).slice(-1)[0]?.trim();
  return (
    `tabd: the daemon (${command} serve) ${how} before it could answer` +
    (said ? `: ${said.length > 300 ? `${said.slice(0, 299)}…` : said}` : "") +
    `. Fix: run "${command} doctor" in a terminal, which names what is missing; reinstall tabd ` +
    `(pipx install --force /path/to/tabd) or set "tabd.path" to a tabd that runs; check "tabd.args". ` +
    `Then run "tabd: Restart the daemon".`
  );
}

/** The last `keep` lines a stream wrote, for exitMessage. */
export class LineTail {
  private readonly lines: string[] = [];

  constructor(private readonly keep = 20) {}

  push(line: string): void {
    this.lines.push(line);
    if (this.lines.length > this.keep) {
      this.lines.shift();
    }
  }

  clear(): void {
    this.lines.length = 0;
  }

  get(): string[] {
    return [...this.lines];
  }
}

/** "suggestion 2 of 3" after Alt+] / Alt+[; "no other suggestion" when the answer on screen has one item or none. */
export function cycleNote(index: number, count: number): string {
  return count < 2 ? "no other suggestion" : `suggestion ${index + 1} of ${count}`;
}
