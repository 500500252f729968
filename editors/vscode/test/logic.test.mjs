// Unit tests of the extension's pure logic (out/logic.js, compiled by `npm run compile`).
// Run: npm test   (or: node --test test/)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import {
  readSettings,
  initializationOptions,
  serveArgs,
  expandPath,
  parseStats,
  formatMs,
  formatPercent,
  statusText,
  statusTooltip,
  resolveExecutable,
  notFoundMessage,
  exitMessage,
  LineTail,
  newTabTally,
  recordTab,
  cycleNote,
} from "../out/logic.js";

const here = path.dirname(fileURLToPath(import.meta.url));

test("settings: defaults", () => {
  const s = readSettings({});
  assert.deepEqual(s, { path: "tabd", args: [], model: "", depth: null, log: "", statsInterval: 2000 });
  assert.deepEqual(initializationOptions(s), {});
  assert.deepEqual(serveArgs(s), ["serve"]);
});

test("settings: values pass through to initializationOptions", () => {
  const s = readSettings({ path: " /opt/tabd ", args: ["--device", "cpu", 3], model: "m1", depth: 2, log: "/tmp/t.jsonl" });
  assert.equal(s.path, "/opt/tabd");
  assert.deepEqual(s.args, ["--device", "cpu"]);
  assert.deepEqual(initializationOptions(s), { model: "m1", depth: 2, log: "/tmp/t.jsonl" });
  assert.deepEqual(serveArgs(s), ["serve", "--device", "cpu"]);
});

test("settings: depth 0 is kept (speculation off), bad values fall back", () => {
  assert.deepEqual(initializationOptions(readSettings({ depth: 0 })), { depth: 0 });
  for (const depth of [-1, 1.5, "2", null, undefined, NaN]) {
    assert.equal(readSettings({ depth }).depth, null, String(depth));
  }
  assert.equal(readSettings({ path: "" }).path, "tabd");
  assert.equal(readSettings({ path: 42 }).path, "tabd");
  assert.equal(readSettings({ statsInterval: -5 }).statsInterval, 2000);
  assert.equal(readSettings({ statsInterval: 0 }).statsInterval, 0);
  assert.deepEqual(readSettings({ args: "serve" }).args, []);
});

test("settings: paths are expanded", () => {
  assert.equal(expandPath("~/x.jsonl", undefined, "/home/u"), "/home/u/x.jsonl");
  assert.equal(expandPath("~", undefined, "/home/u"), "/home/u");
  assert.equal(expandPath("a~/b", undefined, "/home/u"), "a~/b");
  assert.equal(expandPath("${workspaceFolder}/.tabd/log.jsonl", "/w"), "/w/.tabd/log.jsonl");
  assert.equal(expandPath("${userHome}/l", undefined, "/h"), "/h/l");
  const s = readSettings({ log: "${workspaceFolder}/tabd.jsonl" });
  assert.deepEqual(initializationOptions(s, "/w"), { log: "/w/tabd.jsonl" });
});

const FULL = {
  sources: { cache: 30, typed: 5, inflight: 2, model: 10, none: 1 },
  prefetch: { started: 40, finished: 35, cancelled: 5 },
  after_accept: { requests: 12, from_cache: 11, hit_rate: 0.9166, p50_ms: 0.31 },
  last: { source: "cache", latency_ms: 0.27 },
  model: "tabd-tiny",
};

test("stats: full answer", () => {
  const s = parseStats(FULL);
  assert.equal(s.model, "tabd-tiny");
  assert.deepEqual(s.sources, FULL.sources);
  assert.deepEqual(s.prefetch, FULL.prefetch);
  assert.deepEqual(s.afterAccept, { requests: 12, fromCache: 11, hitRate: 0.9166, p50Ms: 0.31 });
  assert.deepEqual(s.last, { source: "cache", latencyMs: 0.27 });
  // The daemon's after-accept figures count text typed through a suggestion: the status counts Tabs only.
  assert.equal(statusText(s), "$(sparkle) tabd: no Tabs yet");
  const tally = newTabTally();
  recordTab(tally, { source: "cache", origin: "cache", latencyMs: 0.31 });
  recordTab(tally, { source: "none", origin: "typed", latencyMs: 0.2 });
  recordTab(tally, { source: "model", origin: "model", latencyMs: 90 });
  recordTab(tally, { source: "cache", origin: "cache", latencyMs: 0.4 });
  assert.equal(statusText(s, tally), "$(sparkle) tabd 0.35 ms · 75% hit");
  const tip = statusTooltip(s, undefined, tally);
  assert.match(tip, /tabd-tiny/);
  assert.match(tip, /After Tab: 4 Tabs, 3 next suggestions from memory \(75%\), median 0\.35 ms/);
  assert.match(tip, /typing through a suggestion included\): 12 requests, 11 from cache \(92%\), median 0\.31 ms/);
  assert.match(statusTooltip(s), /After Tab: 0 Tabs, 0 next suggestions from memory\n/);
  assert.match(tip, /cache 30, typed 5, inflight 2, model 10, none 1/);
  assert.match(tip, /40 started, 35 finished, 5 cancelled/);
  assert.match(tip, /Last: cache, 0\.27 ms/);
});

test("stats: empty, partial and malformed answers", () => {
  for (const raw of [null, undefined, 3, "x", []]) {
    assert.equal(parseStats(raw), undefined);
  }
  assert.equal(statusText(undefined), "$(sparkle) tabd");
  const empty = parseStats({});
  assert.deepEqual(empty.sources, { cache: 0, typed: 0, inflight: 0, model: 0, none: 0 });
  assert.deepEqual(empty.afterAccept, { requests: 0, fromCache: 0, hitRate: null, p50Ms: null });
  assert.equal(empty.last, null);
  assert.equal(statusText(empty), "$(sparkle) tabd: no Tabs yet");
  const odd = parseStats({ sources: { cache: "7", model: -1 }, after_accept: { requests: 4, from_cache: 3, p50_ms: null }, last: { source: 5 } });
  assert.equal(odd.sources.cache, 0);
  assert.equal(odd.sources.model, 0);
  assert.equal(odd.afterAccept.hitRate, 0.75); // derived when hit_rate is missing
  assert.equal(odd.last, null);
  assert.equal(statusText(odd), "$(sparkle) tabd: no Tabs yet"); // 75% after accepts, but no Tab yet
  const unknown = newTabTally();
  recordTab(unknown, undefined);
  assert.equal(statusText(odd, unknown), "$(sparkle) tabd – · 0% hit");
  assert.equal(parseStats({ after_accept: { requests: 2, from_cache: 1, hit_rate: 50 } }).afterAccept.hitRate, 0.5);
});

test("format: latency and percentages", () => {
  assert.equal(formatMs(0.0421), "0.04 ms");
  assert.equal(formatMs(3.14), "3.1 ms");
  assert.equal(formatMs(152.6), "153 ms");
  assert.equal(formatMs(1234), "1.2 s");
  assert.equal(formatMs(null), "–");
  assert.equal(formatMs(-1), "–");
  assert.equal(formatPercent(1), "100%");
  assert.equal(formatPercent(0), "0%");
  assert.equal(formatPercent(1.7), "100%");
  assert.equal(formatPercent(null), "–");
});

test("executable: found on PATH or by path, missing is undefined", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "tabd-ext-"));
  const exe = path.join(dir, "tabd");
  fs.writeFileSync(exe, "#!/bin/sh\n");
  fs.chmodSync(exe, 0o755);
  const plain = path.join(dir, "notexec");
  fs.writeFileSync(plain, "");
  try {
    assert.equal(resolveExecutable("tabd", { PATH: `/nonexistent${path.delimiter}${dir}` }), exe);
    assert.equal(resolveExecutable(exe, { PATH: "" }), exe);
    assert.equal(resolveExecutable("./tabd", { PATH: "" }, dir), exe);
    assert.equal(resolveExecutable("tabd", { PATH: "/nonexistent" }), undefined);
    assert.equal(resolveExecutable(path.join(dir, "nope"), { PATH: "" }), undefined);
    assert.equal(resolveExecutable(dir, { PATH: "" }), undefined); // a directory
    if (process.platform !== "win32") {
      assert.equal(resolveExecutable(plain, { PATH: "" }), undefined);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.match(notFoundMessage("tabd"), /cannot find the tabd executable "tabd".*tabd\.path/);
});

test("extension: no client-side tabd.accept/tabd.dismiss (the language client registers them)", () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(here, "..", "package.json"), "utf8"));
  const contributed = pkg.contributes.commands.map((c) => c.command);
  // The daemon's own commands, which the language client registers from executeCommandProvider.
  for (const cmd of ["tabd.accept", "tabd.dismiss", "tabd.acceptInlineEdit", "tabd.rejectInlineEdit"]) {
    assert.ok(!contributed.includes(cmd), `${cmd} contributed`);
    for (const file of fs.readdirSync(path.join(here, "..", "src"))) {
      const text = fs.readFileSync(path.join(here, "..", "src", file), "utf8");
      assert.ok(!text.includes(`registerCommand("${cmd}"`), `${cmd} registered in ${file}`);
    }
  }
  assert.equal(pkg.engines.vscode, "^1.91.0");
  assert.match(pkg.dependencies["vscode-languageclient"], /10\.1\./);
});

test("manifest: every language from startup, the #27 settings' defaults, Tab and Esc for a next edit, Alt+\\ to ask", () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(here, "..", "package.json"), "utf8"));
  assert.deepEqual(pkg.activationEvents, ["onStartupFinished"]);
  const props = pkg.contributes.configuration.properties;
  assert.deepEqual(props["tabd.enable"].default, { "*": true, plaintext: false, markdown: false, scminput: false });
  assert.deepEqual(props["tabd.exclude"].default, []);
  const commands = pkg.contributes.commands.map((c) => c.command);
  for (const cmd of ["tabd.toggle", "tabd.snooze", "tabd.toggleLanguage", "tabd.menu", "tabd.inlineEdit.tab", "tabd.inlineEdit.dismiss"]) {
    assert.ok(commands.includes(cmd), cmd);
  }
  const when = "editorTextFocus && tabd.inlineEditVisible && !inlineSuggestionVisible && !suggestWidgetVisible";
  assert.deepEqual(
    pkg.contributes.keybindings.map((k) => [k.key, k.command, k.when]),
    [
      ["tab", "tabd.inlineEdit.tab", when],
      ["escape", "tabd.inlineEdit.dismiss", when],
      // VS Code 1.100 binds no key to "Trigger Inline Suggestion" (Copilot brings its own Alt+\\): ask now,
      // an invoked request, which may bring alternatives.
      ["alt+\\", "editor.action.inlineSuggest.trigger", "editorTextFocus && !editorReadonly"],
      // Alt+] / Alt+[: VS Code's showNext / showPrevious, through the extension, which says which item is on
      // screen (n of m) or that there is no other.
      ["alt+]", "tabd.showNext", "editorTextFocus && !editorReadonly"],
      ["alt+[", "tabd.showPrevious", "editorTextFocus && !editorReadonly"],
    ],
  );
  // Restricted Mode: declared (the daemon does not start there), the settings that name programs or files restricted.
  const trust = pkg.capabilities.untrustedWorkspaces;
  assert.equal(trust.supported, "limited");
  assert.match(trust.description, /Restricted Mode/);
  for (const name of ["tabd.path", "tabd.args", "tabd.model", "tabd.log", "tabd.exclude", "tabd.include"]) {
    assert.ok(trust.restrictedConfigurations.includes(name), name);
  }
  assert.deepEqual(props["tabd.include"].default, []);
});

test("cycling: which item is on screen, or that there is no other", () => {
  assert.equal(cycleNote(1, 3), "suggestion 2 of 3");
  assert.equal(cycleNote(0, 2), "suggestion 1 of 2");
  assert.equal(cycleNote(0, 1), "no other suggestion");
  assert.equal(cycleNote(0, 0), "no other suggestion");
});

test("a daemon that exits before it answers: how, what it said last, and the fix", () => {
  const tail = new LineTail(3);
  for (const line of ["Traceback (most recent call last):", "  File x", "ModuleNotFoundError: No module named 'tabd.daemon.edits'", ""]) {
    tail.push(line);
  }
  assert.equal(tail.get().length, 3);
  const m = exitMessage("/opt/tabd", 1, null, tail.get());
  assert.match(m, /^tabd: the daemon \(\/opt\/tabd serve\) exited with code 1 before it could answer: ModuleNotFoundError: No module named 'tabd\.daemon\.edits'\./);
  assert.match(m, /Fix: run "\/opt\/tabd doctor"/);
  assert.match(m, /tabd\.path/);
  assert.match(exitMessage("tabd", null, "SIGKILL", []), /was killed by SIGKILL before it could answer\. Fix/);
});
