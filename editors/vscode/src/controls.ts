// The pure side of the user's controls (#27): the per-language `tabd.enable` map, the
// `tabd.exclude` globs, snooze minutes, the daemon's reason for an empty answer, and the
// status bar's words for all of them. No `vscode` import, so `node --test` loads it as is.

/** Language id -> on/off, "*" for every language not named (as Copilot's `github.copilot.enable`). */
export type EnableMap = Record<string, boolean>;

export const DEFAULT_ENABLE: EnableMap = { "*": true, plaintext: false, markdown: false, scminput: false };

export const DEFAULT_SNOOZE_MINUTES = 15;

/** A value read from settings, and what was wrong with what the user wrote (shown as a warning, then ignored). */
export interface Read<T> {
  value: T;
  problem?: string;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * `tabd.enable` as VS Code hands it over. Not an object: the defaults, and a problem. Entries that are not
 * booleans are dropped (the rest is kept) and named in the problem. The defaults fill what the map leaves out,
 * so `{"python": false}` keeps Markdown off and every other language on.
 */
export function readEnableMap(raw: unknown): Read<EnableMap> {
  if (raw === undefined || raw === null) {
    return { value: { ...DEFAULT_ENABLE } };
  }
  if (!isObject(raw)) {
    return {
      value: { ...DEFAULT_ENABLE },
      problem: `tabd.enable must be an object of language ids to true/false (e.g. {"*": true, "markdown": false}), got ${JSON.stringify(raw)}; using the defaults`,
    };
  }
  const value: EnableMap = { ...DEFAULT_ENABLE };
  const bad: string[] = [];
  for (const [language, on] of Object.entries(raw)) {
    if (typeof on === "boolean") {
      value[language] = on;
    } else {
      bad.push(`"${language}": ${JSON.stringify(on)}`);
    }
  }
  return bad.length
    ? { value, problem: `tabd.enable: values must be true or false; ignored ${bad.join(", ")}` }
    : { value };
}

/** Whether suggestions are on for a language: its own entry, else "*", else on. */
export function languageEnabled(map: EnableMap, languageId: string): boolean {
  if (Object.prototype.hasOwnProperty.call(map, languageId)) {
    return map[languageId];
  }
  return map["*"] ?? true;
}

/** `tabd.exclude`: a list of globs for the daemon (initializationOptions `exclude`); other entries dropped. */
export function readExclude(raw: unknown): Read<string[]> {
  if (raw === undefined || raw === null) {
    return { value: [] };
  }
  if (!Array.isArray(raw)) {
    return { value: [], problem: `tabd.exclude must be a list of globs, got ${JSON.stringify(raw)}; ignored` };
  }
  const value: string[] = [];
  const bad: unknown[] = [];
  for (const g of raw) {
    if (typeof g === "string" && g.trim() !== "") {
      value.push(g.trim());
    } else {
      bad.push(g);
    }
  }
  return bad.length ? { value, problem: `tabd.exclude: entries must be non-empty globs; ignored ${JSON.stringify(bad)}` } : { value };
}

/**
 * The minutes the user typed for a snooze. Empty: the default. Anything but a positive number is an error
 * (the caller shows it and snoozes nothing).
 */
export function parseSnoozeMinutes(input: unknown): Read<number | undefined> {
  if (input === undefined || input === null || (typeof input === "string" && input.trim() === "")) {
    return { value: DEFAULT_SNOOZE_MINUTES };
  }
  const n = typeof input === "number" ? input : typeof input === "string" ? Number(input.trim()) : NaN;
  if (!Number.isFinite(n) || n <= 0) {
    return { value: undefined, problem: `tabd: snooze needs a number of minutes above 0, got ${JSON.stringify(input)}; not snoozed` };
  }
  return { value: n };
}

/** The contract's reason codes for an empty answer, in the words the status bar uses. */
export const REASON_WORDS: Record<string, string> = {
  unsure: "unsure",
  debounced: "waiting for typing to pause",
  superseded: "superseded by a newer request",
  excluded: "excluded file",
  disabled: "disabled",
  loading: "model loading",
  unreachable: "engine unreachable",
  slow: "engine slow",
  error: "error (see the log)",
  nothing: "the model wrote nothing",
};

export function reasonInWords(code: string | undefined): string | undefined {
  if (code === undefined) {
    return undefined;
  }
  return REASON_WORDS[code] ?? code;
}

/**
 * The reason an inlineCompletion result carries, `{"items": [], "tabd": {"reason": CODE}}`; undefined when it
 * has items or no reason (an older daemon).
 */
export function emptyReason(result: unknown): string | undefined {
  const items = Array.isArray(result) ? result : isObject(result) ? result.items : undefined;
  if (Array.isArray(items) && items.length > 0) {
    return undefined;
  }
  const tabd = isObject(result) ? result.tabd : undefined;
  return isObject(tabd) && typeof tabd.reason === "string" ? tabd.reason : undefined;
}

/**
 * The rule an excluded document's answer names (`{"tabd": {"reason": "excluded", "rule": ".env* (the default deny
 * list)"}}`, in the daemon's words), or undefined (another answer, or a daemon that does not say).
 */
export function excludedRule(result: unknown): string | undefined {
  const tabd = isObject(result) ? result.tabd : undefined;
  return isObject(tabd) && tabd.reason === "excluded" && typeof tabd.rule === "string" && tabd.rule.trim()
    ? tabd.rule.trim()
    : undefined;
}

/** How to change the rule that excludes a file, by the daemon's words for it. */
export function excludedHelp(rule: string | undefined): string {
  if (rule === undefined) {
    return "the daemon's deny list (.env*, *.pem, *.key, id_rsa*, *credentials*, *secret*), a tabd.exclude glob or git keeps it out; tabd.include lets a file that tabd.exclude or git keeps out back in";
  }
  if (rule.endsWith("(the default deny list)")) {
    return "the deny list keeps secrets out and cannot be changed; rename the file if it holds none";
  }
  if (rule.endsWith("(exclude)")) {
    return "remove the glob from the tabd.exclude setting, or add the file to tabd.include";
  }
  if (rule === "git ignores it") {
    return "add a glob for it (or its folder) to the tabd.include setting";
  }
  return "see tabd.exclude and tabd.include";
}

/** What decides the status bar besides the daemon's figures. */
export interface ControlState {
  enabled: boolean;
  /** epoch ms when a snooze ends, or null */
  snoozedUntil: number | null;
  /** the active editor's language, when there is one */
  language?: string;
  languageOn: boolean;
  /** the last empty answer's reason code in the active document, when the last answer there was empty */
  reason?: string;
  /** for an excluded document: the rule that excludes it, in the daemon's words */
  rule?: string;
}

/** Whole minutes left of a snooze, at least 1 while it lasts. */
export function minutesLeft(until: number, now: number): number {
  return Math.max(1, Math.ceil((until - now) / 60000));
}

/**
 * The status bar's text when a control decides it (undefined: show the daemon's figures), and the tooltip
 * line that says why suggestions are off or why the last answer was empty.
 */
export function controlStatus(state: ControlState, now: number): { text?: string; line?: string } {
  if (state.snoozedUntil !== null && state.snoozedUntil > now) {
    const m = minutesLeft(state.snoozedUntil, now);
    return { text: `$(clock) tabd: snoozed ${m} min`, line: `Snoozed: suggestions come back in ${m} min` };
  }
  if (!state.enabled) {
    return { text: "$(circle-slash) tabd: disabled", line: "Disabled: run 'tabd: Toggle suggestions' or click here" };
  }
  if (state.language !== undefined && !state.languageOn) {
    return {
      text: `$(circle-slash) tabd: off for ${state.language}`,
      line: `Off for ${state.language} (setting tabd.enable)`,
    };
  }
  const words = reasonInWords(state.reason);
  if (words === undefined) {
    return {};
  }
  // States worth the status bar's text; the passing ones (unsure, debounced) only in the tooltip.
  const shown = ["excluded", "disabled", "loading", "unreachable", "slow", "error"].includes(state.reason ?? "");
  if (state.reason === "excluded") {
    const rule = state.rule ? `: ${state.rule}` : "";
    return {
      text: `$(circle-slash) tabd: excluded file${state.rule ? ` (${state.rule})` : ""}`,
      line: `Last empty answer: excluded file${rule}. To change it: ${excludedHelp(state.rule)}.`,
    };
  }
  return { text: shown ? `$(circle-slash) tabd: ${words}` : undefined, line: `Last empty answer: ${words}` };
}

/** A language as VS Code's extensions declare it (contributes.languages). */
export interface LanguageContribution {
  id?: unknown;
  extensions?: unknown;
}

/**
 * Whether the file's own extension names its language (`main.py` is python), so "Disable for python" means
 * something; not when VS Code took the language from the file's whole name, a pattern, its first line or a guess
 * (`.env` is "properties"): the menu then offers the file or its folder instead.
 */
export function languageNamedByExtension(fileName: string, languageId: string, languages: LanguageContribution[]): boolean {
  const base = (fileName.split(/[\\/]/).pop() ?? "").toLowerCase();
  for (const language of languages) {
    if (language.id !== languageId || !Array.isArray(language.extensions)) {
      continue;
    }
    for (const ext of language.extensions) {
      if (typeof ext === "string" && ext.length > 0 && base.length > ext.length && base.endsWith(ext.toLowerCase())) {
        return true;
      }
    }
  }
  return false;
}
