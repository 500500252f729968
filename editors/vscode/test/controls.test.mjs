// Unit tests of the user's controls (out/controls.js): the tabd.enable map, tabd.exclude,
// snooze minutes, empty answers' reasons and the status bar's words.
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  DEFAULT_ENABLE,
  readEnableMap,
  languageEnabled,
  readExclude,
  parseSnoozeMinutes,
  emptyReason,
  reasonInWords,
  controlStatus,
  excludedRule,
  excludedHelp,
  languageNamedByExtension,
} from "../out/controls.js";
import { initializationOptions, readSettings, parseStats, statusTooltip } from "../out/logic.js";

test("enable map: defaults are every language but plain text, Markdown and the SCM input", () => {
  const { value, problem } = readEnableMap(undefined);
  assert.equal(problem, undefined);
  assert.deepEqual(value, DEFAULT_ENABLE);
  assert.equal(languageEnabled(value, "typescript"), true);
  assert.equal(languageEnabled(value, "python"), true);
  assert.equal(languageEnabled(value, "markdown"), false);
  assert.equal(languageEnabled(value, "plaintext"), false);
  assert.equal(languageEnabled(value, "scminput"), false);
});

test("enable map: the user's entries over the defaults, '*' for the rest", () => {
  const { value } = readEnableMap({ "*": false, python: true });
  assert.equal(languageEnabled(value, "python"), true);
  assert.equal(languageEnabled(value, "go"), false);
  assert.equal(languageEnabled(readEnableMap({ markdown: true }).value, "markdown"), true);
  assert.equal(languageEnabled({}, "rust"), true);
});

test("enable map: a wrong type is reported and ignored", () => {
  for (const raw of [true, "python", 3, ["python"]]) {
    const { value, problem } = readEnableMap(raw);
    assert.deepEqual(value, DEFAULT_ENABLE, String(raw));
    assert.match(problem, /tabd.enable must be an object/);
  }
  const { value, problem } = readEnableMap({ python: "yes", go: false });
  assert.equal(languageEnabled(value, "python"), true); // the bad entry is dropped, "*" decides
  assert.equal(languageEnabled(value, "go"), false);
  assert.match(problem, /"python": "yes"/);
});

test("exclude: globs go to initializationOptions only when set; bad entries reported", () => {
  assert.deepEqual(readExclude(undefined), { value: [] });
  assert.deepEqual(readExclude(["*.secret.ts", " build/** "]), { value: ["*.secret.ts", "build/**"] });
  const bad = readExclude(["a/**", 3, ""]);
  assert.deepEqual(bad.value, ["a/**"]);
  assert.match(bad.problem, /ignored \[3,""\]/);
  assert.match(readExclude("*.env").problem, /must be a list/);
  const s = readSettings({});
  assert.deepEqual(initializationOptions(s, "/w", []), {});
  assert.deepEqual(initializationOptions(s, "/w", ["x/**"]), { exclude: ["x/**"] });
});

test("snooze: empty is 15 minutes; 0, negatives and words are errors", () => {
  assert.deepEqual(parseSnoozeMinutes(""), { value: 15 });
  assert.deepEqual(parseSnoozeMinutes(undefined), { value: 15 });
  assert.deepEqual(parseSnoozeMinutes("30"), { value: 30 });
  assert.deepEqual(parseSnoozeMinutes(2.5), { value: 2.5 });
  for (const bad of ["0", "-1", 0, -5, "soon", NaN, {}]) {
    const r = parseSnoozeMinutes(bad);
    assert.equal(r.value, undefined, String(bad));
    assert.match(r.problem, /above 0/);
  }
});

test("reasons: read from an empty answer only, in words", () => {
  assert.equal(emptyReason({ items: [], tabd: { reason: "unsure" } }), "unsure");
  assert.equal(emptyReason({ items: [{ insertText: "x" }], tabd: { reason: "unsure" } }), undefined);
  assert.equal(emptyReason({ items: [] }), undefined);
  assert.equal(emptyReason(null), undefined);
  assert.equal(emptyReason([]), undefined);
  assert.equal(reasonInWords("debounced"), "waiting for typing to pause");
  assert.equal(reasonInWords("excluded"), "excluded file");
  assert.equal(reasonInWords("loading"), "model loading");
  assert.equal(reasonInWords("unreachable"), "engine unreachable");
  assert.equal(reasonInWords("brand-new"), "brand-new");
  assert.equal(parseStats({ last: { source: "none", latency_ms: 3, reason: "unsure" } }).last.reason, "unsure");
});

test("status: snoozed, disabled, off for a language, excluded, and a passing reason in the tooltip only", () => {
  const base = { enabled: true, snoozedUntil: null, language: "python", languageOn: true };
  const now = 1_000_000;
  assert.deepEqual(controlStatus(base, now), {});
  const snoozed = controlStatus({ ...base, snoozedUntil: now + 14.2 * 60000 }, now);
  assert.match(snoozed.text, /snoozed 15 min/);
  assert.match(controlStatus({ ...base, enabled: false }, now).text, /disabled/);
  assert.match(controlStatus({ ...base, language: "markdown", languageOn: false }, now).text, /off for markdown/);
  assert.match(controlStatus({ ...base, reason: "excluded" }, now).text, /excluded file/);
  const unsure = controlStatus({ ...base, reason: "unsure" }, now);
  assert.equal(unsure.text, undefined);
  assert.equal(unsure.line, "Last empty answer: unsure");
  assert.match(statusTooltip(parseStats({}), unsure.line), /Last empty answer: unsure/);
  // A snooze that has run out is no snooze.
  assert.deepEqual(controlStatus({ ...base, snoozedUntil: now - 1 }, now), {});
});

test("status: next-edit figures in the tooltip when the daemon has them", () => {
  const stats = parseStats({ edits: { requests: 4, shown: 3, accepted: 2, rejected: 1, from_memory: 2, gated: 0 } });
  assert.deepEqual(stats.edits, { requests: 4, shown: 3, accepted: 2, rejected: 1, fromMemory: 2 });
  assert.match(statusTooltip(stats), /Next edits: 3 shown, 2 accepted, 1 dismissed, 2 of 4 answered from memory/);
  assert.equal(parseStats({}).edits, undefined);
  assert.doesNotMatch(statusTooltip(parseStats({})), /Next edits/);
});

test("excluded: the rule the daemon names, and how to change it", () => {
  assert.equal(excludedRule({ items: [], tabd: { reason: "excluded", rule: ".env* (the default deny list)" } }),
    ".env* (the default deny list)");
  assert.equal(excludedRule({ items: [], tabd: { reason: "excluded" } }), undefined); // a daemon that does not say
  assert.equal(excludedRule({ items: [], tabd: { reason: "unsure", rule: "x" } }), undefined);
  assert.equal(excludedRule(null), undefined);
  const now = 1_000_000;
  const base = { enabled: true, snoozedUntil: null, languageOn: true, reason: "excluded" };
  const own = controlStatus({ ...base, rule: "**/private_*.py (exclude)" }, now);
  assert.equal(own.text, "$(circle-slash) tabd: excluded file (**/private_*.py (exclude))");
  assert.match(own.line, /^Last empty answer: excluded file: \*\*\/private_\*\.py \(exclude\)\. To change it: remove the glob from the tabd\.exclude setting/);
  assert.match(controlStatus({ ...base, rule: "git ignores it" }, now).line, /tabd\.include/);
  assert.match(controlStatus({ ...base, rule: ".env* (the default deny list)" }, now).line, /deny list keeps secrets out/);
  // no rule from the daemon: the status still says excluded, and the settings that decide it
  const older = controlStatus(base, now);
  assert.equal(older.text, "$(circle-slash) tabd: excluded file");
  assert.match(older.line, /tabd\.exclude/);
  assert.match(excludedHelp(undefined), /tabd\.include/);
});

test("menu: a language the file's extension names, not one VS Code took from the name or guessed", () => {
  const languages = [
    { id: "python", extensions: [".py", ".pyi"] },
    { id: "properties", extensions: [".conf", ".properties", ".gitconfig"], filenames: [".env"] },
    { id: "properties", extensions: [".npmrc"] },
  ];
  assert.equal(languageNamedByExtension("/w/app/main.py", "python", languages), true);
  assert.equal(languageNamedByExtension("/w/app/.env", "properties", languages), false); // by its whole name
  assert.equal(languageNamedByExtension("/w/.gitconfig", "properties", languages), false); // the name is the extension
  assert.equal(languageNamedByExtension("/w/app.conf", "properties", languages), true);
  assert.equal(languageNamedByExtension("/w/notes", "python", languages), false); // no extension: a guess
  assert.equal(languageNamedByExtension("C:\\w\\MAIN.PY", "python", languages), true);
  assert.equal(languageNamedByExtension("/w/x.py", "python", [{ id: "python", extensions: "bad" }]), false);
});
